"""The item residual beside a sparse GP: held-out log loss with and without it, beside counting.

Simulated crowds whose items have 2-D features, a smooth utility sin x₀ + ½ cos 2x₁ and an item effect
of sd ``r_sd`` that the features do not explain (0: none), labels from the probit; GPPL on one user's
labels and crowdGPPL (C = 5) on 100 users with personal tastes, each sparse (M inducing items among N).
Per-item counting (each item's smoothed win rate on the probit scale) and the oracle stand beside them.
What ``item_residual="auto"`` and the prior Gamma(2, ½) on s_r were chosen by (crowdzoo.gp.residual).

    python benchmarks/bench_residual.py --out docs/benchmarks.md
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
from scipy.stats import norm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import machine, replace_section  # noqa: E402

import crowdzoo as cz  # noqa: E402

HEAD = "<!-- bench_residual.py: this section is rewritten by it -->"

#: (name, items N, users U, training labels P, inducing M, residual sd)
CROWDS = [("many labels, item effects", 300, 1, 30000, 30, 0.8),
          ("many labels, no item effects", 300, 1, 30000, 30, 0.0),
          ("few labels, item effects", 600, 1, 3000, 100, 0.8),
          ("few labels, no item effects", 600, 1, 3000, 100, 0.0),
          ("crowd, item effects", 300, 100, 30000, 30, 0.8),
          ("crowd, no item effects", 300, 100, 30000, 30, 0.0)]


def crowd(N, U, P, r_sd, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (N, 2))
    f = np.sin(X[:, 0]) + 0.5 * np.cos(2 * X[:, 1]) + rng.normal(0, r_sd, N)
    taste = 0.6 if U > 1 else 0.0
    F = f[None, :] + taste * rng.normal(0, 1, (U, 2)) @ np.stack([np.cos(X[:, 1]), np.sin(X[:, 0])])

    def labels(n):
        a = rng.integers(0, N, n)
        b = (a + rng.integers(1, N, n)) % N
        u = rng.integers(0, U, n)
        return a, b, u, (rng.random(n) < norm.cdf(F[u, a] - F[u, b])).astype(float)

    return X, labels(P), labels(5000), F


def log_loss(p, y):
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def run(name, N, U, P, M, r_sd, seed, rates):
    X, (a, b, u, y), (ta, tb, tu, ty), F = crowd(N, U, P, r_sd, seed)
    wins = np.bincount(a, y, N) + np.bincount(b, 1 - y, N)
    n = np.bincount(a, None, N) + np.bincount(b, None, N)
    s = norm.ppf((wins + 1) / (n + 2))
    row = {"crowd": name, "oracle": log_loss(norm.cdf(F[tu, ta] - F[tu, tb]), ty),
           "counting": log_loss(norm.cdf(s[ta] - s[tb]), ty)}
    if U > 1:
        data = cz.PairwiseData.from_arrays(a, b, y, item_features=X, users=u)
    else:
        data = cz.PairwiseData.from_arrays(a, b, y, item_features=X)
    for label, res, rate in [("off", False, 0.5)] + [(f"rate {r:g}", True, r) for r in rates]:
        if U > 1:
            model = cz.CrowdGPPL(n_components=5, n_inducing=M, item_residual=res, rate_r0=rate)
        else:
            model = cz.GPPL(n_inducing=M, item_residual=res, rate_r0=rate)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = cz.fit(model, data, progress_bar=False, seed=seed)
        secs = time.perf_counter() - t0
        p = post.predict_proba(ta, tb, users=tu) if U > 1 else post.predict_proba(ta, tb)
        row[label] = (log_loss(p, ty), secs)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=None, help="markdown file whose section to rewrite")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--rates", default="0.25,0.5,1", help="the Gamma rates β_r of s_r to try")
    args = ap.parse_args(argv)
    rates = [float(r) for r in args.rates.split(",")]
    rows = []
    for spec in CROWDS:
        runs = [run(*spec, seed, rates) for seed in range(args.seeds)]
        row = {"crowd": spec[0], "N, U, P, M": f"{spec[1]}, {spec[2]}, {spec[3]}, {spec[4]}"}
        for k in ("oracle", "counting"):
            row[k] = np.mean([r[k] for r in runs])
        for k in ["off"] + [f"rate {r:g}" for r in rates]:
            row[k] = (np.mean([r[k][0] for r in runs]), np.mean([r[k][1] for r in runs]))
        rows.append(row)
        print(row, flush=True)
    cols = ["off"] + [f"rate {r:g}" for r in rates]
    lines = [HEAD, "", "## The item residual beside a sparse GP", "",
             f"Machine: {machine()}. `python benchmarks/bench_residual.py --out docs/benchmarks.md` "
             f"(means over {args.seeds} seeds; seconds per fit on a shared, loaded machine).", "",
             "Held-out log loss of GPPL (one user) and crowdGPPL (C = 5, 100 users with personal tastes) "
             "with M inducing items among N: without the item residual (*off*) and with it under a "
             "Gamma(2, β_r) prior on s_r (the default β_r = ½); *counting* is each item's smoothed win rate "
             "on the probit scale, *oracle* the true probabilities.", "",
             "| crowd | N, U, P, M | oracle | counting | " + " | ".join(cols) + " | s (off / ½) |",
             "|---|---|---:|---:|" + "---:|" * len(cols) + "---:|"]
    for r in rows:
        cells = " | ".join(f"{r[c][0]:.3f}" for c in cols)
        lines.append(f"| {r['crowd']} | {r['N, U, P, M']} | {r['oracle']:.3f} | {r['counting']:.3f} | "
                     f"{cells} | {r['off'][1]:.1f} / {r.get('rate 0.5', r['off'])[1]:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        replace_section(args.out, HEAD, text)


if __name__ == "__main__":
    main()
