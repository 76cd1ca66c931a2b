"""SCDC and BayesSCDC with their defaults on a small image set, the kind a new user brings: 400 of
scikit-learn's digits drawn at random, six workers × 150 balanced pairs (MCVC, :func:`~crowdzoo.data.
simulate_links.mcvc_workers`) with α = β = 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, and ``Model(n_clusters=10)``
with nothing else set (the rule of ``crowdzoo/models/scdc/defaults.py``, three initialisations);
k-means and a full-covariance Gaussian mixture on the pixels beside them. Each (seed, method) appends
one JSON line to ``--out``; ``--summarise`` prints the markdown table of docs/scdc.md's "Defaults".

    OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python benchmarks/scdc_defaults_small.py --seeds 0 1 2 \\
        --out benchmarks/results/scdc_defaults_small.jsonl
    .venv/bin/python benchmarks/scdc_defaults_small.py \\
        --summarise benchmarks/results/scdc_defaults_small.jsonl
"""
from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

ALPHA = (0.95, 0.9, 0.85, 0.8, 0.75, 0.7)
METHODS = ("SCDC", "BayesSCDC", "k-means", "Gaussian mixture")


def small_digits(seed: int, n_items: int = 400, pairs_per_worker: int = 150):
    """(LinkData, labels): ``n_items`` random digits (pixels / 16) and the six workers' pairs."""
    from sklearn.datasets import load_digits

    import crowdzoo as cz
    from crowdzoo.data.simulate_links import mcvc_workers

    digits = load_digits()
    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(digits.target.size, n_items, replace=False))
    O, y = digits.data[keep] / 16.0, digits.target[keep].astype(np.int64)
    df = mcvc_workers(y, len(ALPHA), ALPHA, ALPHA, pairs_per_worker, seed=rng)
    data = cz.LinkData.from_arrays(df["i"].to_numpy(), df["j"].to_numpy(), df["same"].to_numpy(), O,
                                   workers=df["worker"].to_numpy())
    return data, y


def run(seed: int, method: str) -> dict:
    import crowdzoo as cz
    from crowdzoo.cluster_metrics import hungarian_accuracy, nmi

    data, y = small_digits(seed)
    t0 = time.perf_counter()
    extra = {}
    if method == "k-means":
        from sklearn.cluster import KMeans

        pred = KMeans(10, n_init=10, random_state=seed).fit_predict(data.O)
    elif method == "Gaussian mixture":
        from sklearn.mixture import GaussianMixture

        gmm = GaussianMixture(10, covariance_type="full", reg_covar=1e-3, random_state=seed)
        pred = gmm.fit_predict(data.O)
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            post = cz.fit(getattr(cz, method)(n_clusters=10), data, seed=seed, progress_bar=False)
        pred = post.predict().to_numpy()
        extra = {"clusters": len(post.clusters_in_use()),
                 "warnings": sorted({type(w.message).__name__ for w in caught})}
    return {"seed": seed, "method": method, "acc": hungarian_accuracy(y, pred), "NMI": nmi(y, pred),
            "seconds": time.perf_counter() - t0, **extra}


def summarise(paths) -> str:
    import pandas as pd

    df = pd.DataFrame([json.loads(line) for p in paths for line in open(p) if line.strip()])
    lines = ["| method | accuracy mean ± sd | each seed (seed: accuracy) | NMI | s per fit |",
             "|---|---:|---|---:|---:|"]
    for m, g in df.groupby("method", sort=False):
        g = g.sort_values("seed")
        each = ", ".join(f"{int(r.seed)}: {r.acc:.3f}" for r in g.itertuples())
        sd = g.acc.std(ddof=1) if len(g) > 1 else 0.0
        lines.append(f"| {m} | {g.acc.mean():.3f} ± {sd:.3f} | {each} | {g.NMI.mean():.3f} "
                     f"| {g.seconds.mean():.0f} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    ap.add_argument("--out", default="scdc_defaults_small.jsonl")
    ap.add_argument("--summarise", nargs="+", metavar="JSONL")
    a = ap.parse_args(argv)
    if a.summarise:
        print(summarise(a.summarise))
        return
    for seed in a.seeds:
        for m in a.methods:
            row = run(seed, m)
            print(json.dumps(row), flush=True)
            with open(a.out, "a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
