"""Why BALD misses the 70 % bar on the crowdGPPL simulation of ``crowdzoo compare active-gppl``.

Three measurements on that problem (``crowdzoo.comparisons.active``: 30 items × 10 users, C = 3, the
same seeds, oracle and held-out queries):

* **ceilings**: the held-out log loss of the truth's own probabilities, and of the best prediction
  with one utility for every user (the users' mean utility), averaged over the seeds;
* **widths**: on a seed's starting posterior (its 30 random labels) the coverage of the 90 % intervals
  of every candidate's g = f_u(a) − f_u(b) (the Gaussian BALD scores with) against the simulated
  truth, the sd of (g − μ)/σ, the mean posterior sd of the personal part Σ_c v_c w_cu, E[s_v], E[s_w]
  and the fit's seconds, for natgrad, svi (structured mean field), svi with a full-rank guide and
  NUTS (``--nuts``, about 5 minutes a fit on 2 shared cores);
* **widened**: BALD's learning curve over the seeds when the Gaussian it scores with is widened —
  the whole covariance × 4 or × 16, or the draws of v and w k times as far from their means — against
  the comparison's own BALD and random curves (read from ``docs/active-gppl.csv``).

Run: ``.venv/bin/python benchmarks/bench_active_crowd.py [--seeds 10] [--nuts] --out docs/active-crowd.md``.
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd
import torch


def _start_data(p, seed, n_labels):
    from crowdzoo.comparisons import active

    rng = np.random.default_rng([seed, 1])
    a, b, u = active._start(rng, p.n_items, p.n_users, n_labels)
    return p.make(a, b, u, p.answer(rng, a, b, u))


def ceilings(seeds) -> tuple[float, float]:
    from torch.special import ndtr

    from crowdzoo import metrics
    from crowdzoo.comparisons import active

    own, mean_user = [], []
    for seed in seeds:
        p = next(q for q in active.problems(seed) if q.name == "crowdGPPL")
        a, b, u = active._pairs(np.random.default_rng([seed, 2]), p.n_items, p.n_users, active.N_TEST)
        y = p.answer(np.random.default_rng([seed, 3]), a, b, u)  # the comparison's held-out labels
        t = p.truth.mean(1)
        own.append(metrics.cross_entropy(y, p.prob(a, b, u)))
        mean_user.append(metrics.cross_entropy(y, ndtr(torch.as_tensor(t[a] - t[b])).numpy()))
    return float(np.mean(own)), float(np.mean(mean_user))


def widths(seed: int, nuts: bool) -> list[dict]:
    from pyro.infer.autoguide import AutoMultivariateNormal

    import crowdzoo as cz
    from crowdzoo.comparisons import active
    from crowdzoo.core.suggest import candidates

    p = next(q for q in active.problems(seed) if q.name == "crowdGPPL")
    data = _start_data(p, seed, p.start)
    routes = [("natgrad", dict(method="natgrad", progress_bar=False)),
              ("svi (structured mean field)", dict(method="svi", num_steps=2000)),
              ("svi (full-rank guide)", dict(method="svi", guide=AutoMultivariateNormal, num_steps=3000))]
    if nuts:
        routes.append(("nuts", dict(method="nuts", num_samples=300, warmup_steps=300, progress_bar=False)))
    rows = []
    for name, kw in routes:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = cz.fit(p.model, data, seed=seed, **kw)
        seconds = time.perf_counter() - t0
        a, b, u = candidates(post.data.item_ids, post._query_ids()[1])
        Q = post._queries(a, b, u)
        z = (p.truth[a, u] - p.truth[b, u] - Q.mean.numpy()) / np.sqrt(Q.var.numpy())
        dr = post.sample(1000, seed=0)
        personal = torch.einsum("scn,scu->snu", dr["V"], dr["W"]).std(0).mean()
        rows.append({"seed": seed, "route": name, "seconds": seconds, "cover90": np.mean(np.abs(z) < 1.645),
                     "z_sd": z.std(), "personal_sd": float(personal), "E_s_v": float(dr["s_v"].mean()),
                     "E_s_w": float(dr["s_w"].mean())})
        print(rows[-1], flush=True)
    return rows


def widened(seeds) -> pd.DataFrame:
    from crowdzoo.comparisons import active
    from crowdzoo.core.suggest import factor_queries
    from crowdzoo.models.crowdgppl.posterior import CrowdGPPLPosterior

    base = CrowdGPPLPosterior._queries

    def covariance_times(c):
        def queries(self, a, b, u, **kw):
            Q = base(self, a, b, u, **kw)
            Q.var, column = Q.var * c, Q.column
            Q.column = lambda q: c * column(q)
            return Q
        return queries

    def personal_times(k):
        def queries(self, a, b, u, n_draws=1000, seed=0):
            dr = self.sample(n_draws, seed=seed)
            V, W = dr["V"], dr["W"]
            V, W = V.mean(0) + k * (V - V.mean(0)), W.mean(0) + k * (W - W.mean(0))
            return factor_queries(dr.get("t"), V, W, a, b, u, self.label_link(u))
        return queries

    rows = []
    try:
        for name, hook in (("bald, covariance × 4", covariance_times(4.0)),
                           ("bald, covariance × 16", covariance_times(16.0)),
                           ("bald, v and w spread × 2", personal_times(2.0))):
            CrowdGPPLPosterior._queries = hook
            for seed in seeds:
                p = next(q for q in active.problems(seed) if q.name == "crowdGPPL")
                rows += [{**r, "strategy": name} for r in active.curve(p, "bald", seed)]
                print(name, seed, rows[-1]["log_loss"], flush=True)
    finally:
        CrowdGPPLPosterior._queries = base
    return pd.DataFrame(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--width-seeds", type=int, default=1)
    ap.add_argument("--nuts", action="store_true")
    ap.add_argument("--curves", default="docs/active-gppl.csv")
    ap.add_argument("--out", default="docs/active-crowd.md")
    args = ap.parse_args()
    torch.set_num_threads(1)
    own, mean_user = ceilings(range(args.seeds))
    w = pd.DataFrame([r for s in range(args.width_seeds) for r in widths(s, args.nuts)])
    ref = pd.read_csv(args.curves)
    ref = ref[(ref["model"] == "crowdGPPL") & ref["seed"].isin(range(args.seeds))]
    curves = pd.concat([ref, widened(range(args.seeds))], ignore_index=True)
    mean = curves.groupby(["strategy", "labels"])["log_loss"].mean().unstack("labels")
    final = curves[curves["labels"] == curves["labels"].max()].pivot_table(index="seed", columns="strategy",
                                                                            values="log_loss")
    target = float(mean.loc["random"].iloc[-1])
    lines = [f"Made by `.venv/bin/python benchmarks/bench_active_crowd.py --seeds {args.seeds} "
             f"--width-seeds {args.width_seeds}{' --nuts' if args.nuts else ''} --out {args.out}` "
             "(docs/active.md says what it shows).", "",
             f"**Ceilings** over {args.seeds} seeds: held-out log loss {own:.3f} with the truth's own "
             f"probabilities, {mean_user:.3f} with the users' mean utility for everyone.", "",
             "**Widths** on the starting posterior (30 labels) of the crowdGPPL simulation: coverage of the "
             "90 % intervals of every candidate's g against the truth, sd of (g − μ)/σ, mean posterior sd "
             "of the personal part, E[s_v], E[s_w], seconds of the fit.", "",
             "| seed | route | cover 90 % | sd of z | personal sd | E[s_v] | E[s_w] | fit s |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in w.itertuples():
        lines.append(f"| {r.seed} | {r.route} | {r.cover90:.2f} | {r.z_sd:.2f} | {r.personal_sd:.2f} | "
                     f"{r.E_s_v:.2f} | {r.E_s_w:.2f} | {r.seconds:.0f} |")
    lines += ["", f"**Widened** BALD over {args.seeds} seeds: mean held-out log loss after each round; "
              f"random's final is {target:.3f}, 70 % of its budget is "
              f"{int(round(0.7 * mean.columns[-1] / 15) * 15)} labels; last column: final minus random's, "
              "seed by seed (mean ± sd).", "",
              "| strategy | " + " | ".join(str(c) for c in mean.columns) + " | − random, final |",
              "|---|" + "---:|" * (len(mean.columns) + 1)]
    for s, row in mean.iterrows():
        d = final[s] - final["random"]
        lines.append(f"| {s} | " + " | ".join(f"{v:.3f}" for v in row) +
                     f" | {d.mean():+.3f} ± {d.std():.3f} |")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
