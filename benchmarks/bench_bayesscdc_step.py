"""BayesSCDC's global step, ``mixture_step="links"`` (Algorithm 1: the annotated items' local optima with
their messages enter the mixture's statistics) against ``"uniform"`` (the uniform rows alone, encoded
without messages), with SCDC and PCKMeans beside them, on the comparisons' own data and settings:

- ``digits-all``, ``digits-100``, ``digits-none``: :mod:`crowdzoo.comparisons.scdc`'s digits (all or
  100 images annotated, or none), its architecture and epochs (K = 10, d = 8, two layers of 128, 200 +
  200 epochs; ``--model-kw n_clusters=50`` for the paper's MNIST K);
- ``overlapping``, ``overlapping-5000``: :mod:`crowdzoo.comparisons.scdc_crowd`'s "overlapping" and
  "overlapping, 5,000 links" sets with the defaults (``BayesSCDC(n_clusters=K)``);
- ``pinwheel``: :mod:`crowdzoo.comparisons.scdc`'s pinwheel with its 100 annotated items (K = 15, 300
  epochs, no pretraining).

Method ``graph`` takes every epoch's messages from the whole annotation graph (``mixture_step="graph"``).
Method ``features-start`` is ``links`` with the mixture started from pretraining's Gaussian mixture as
it is (``start="features"``), without the links-aware refinement (``natgrad.hmrf_em``) of the default.
One initialisation per fit (``n_init=1``, as the comparisons' tables) unless ``--n-init``. Every fit
appends one JSON line to ``--out``; ``--summarise`` reads such files and prints a markdown table (mean ±
sd over the seeds, and each seed's accuracy).

    OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python benchmarks/bench_bayesscdc_step.py \\
        --set digits-all --seeds 0 1 2 3 4 --methods links uniform SCDC --out runs.jsonl
    .venv/bin/python benchmarks/bench_bayesscdc_step.py --summarise runs.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from scdc_defaults_large import _setting  # noqa: E402  KEY=VALUE as (key, Python literal or string)

SETS = ("digits-all", "digits-100", "digits-none", "overlapping", "overlapping-5000", "pinwheel")
METHODS = ("links", "uniform", "graph", "features-start", "SCDC", "PCKMeans")


def _data(name: str, seed: int):
    """(data, true labels, K, arch, route settings) of set ``name``."""
    import crowdzoo as cz
    from crowdzoo.comparisons import scdc, scdc_crowd

    if name.startswith("digits"):
        s = scdc._settings("digits", False)
        data, truth = cz.digits_links(annotated="all" if name == "digits-all" else 100,
                                      alpha=scdc.DIGITS_ALPHA, seed=seed)
        if name == "digits-none":
            data = data.without_annotations()
        kw = dict(n_epochs=s.pop("n_epochs"), pretrain=s.pop("pretrain"))
        return data, truth["labels"], s.pop("n_clusters"), s, kw
    if name == "pinwheel":
        s = scdc._settings("pinwheel", False)
        data, truth = cz.simulate_links(seed=seed)
        return data, truth["labels"], s.pop("n_clusters"), s, dict(n_epochs=s.pop("n_epochs"), pretrain=0)
    full = {"overlapping-5000": "overlapping, 5,000 links"}.get(name, name)
    data, K, _, _ = scdc_crowd.link_set(full, seed)
    return data, data.labels, K, {}, {}


def run(name: str, seed: int, method: str, n_init: int = 1, extra_kw: dict | None = None,
        model_kw: dict | None = None) -> dict:
    import crowdzoo as cz
    from crowdzoo.cluster_metrics import hungarian_accuracy, nmi
    from crowdzoo.comparisons.scdc_crowd import pckmeans

    data, y, K, arch, kw = _data(name, seed)
    t0 = time.perf_counter()
    if method == "PCKMeans":
        pred = pckmeans(data.O, K, data.i, data.j, data.same, seed=seed)
        extra = {}
    else:
        route = {"links": {"mixture_step": "links", "start": "links"},
                 "uniform": {"mixture_step": "uniform", "start": "links"},
                 "graph": {"mixture_step": "graph", "start": "links"},
                 "features-start": {"mixture_step": "links", "start": "features"}}
        cls, route = (cz.SCDC, {}) if method == "SCDC" else (cz.BayesSCDC, route[method])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = cls(**{"n_clusters": K, **arch, **(model_kw or {})})
            post = cz.fit(model, data, seed=seed, n_init=n_init, progress_bar=False,
                          **{**kw, **route, **(extra_kw or {})})
        pred = post.predict().to_numpy()
        extra = {"clusters": len(post.clusters_in_use())}
    y = np.asarray(y)
    if extra_kw or model_kw:
        given = {**(model_kw or {}), **(extra_kw or {})}
        method = method + " " + " ".join(f"{k}={v}" for k, v in given.items())
    return {"set": name, "seed": seed, "method": method, "n_init": n_init,
            "acc": hungarian_accuracy(y, pred), "NMI": nmi(y, pred), "seconds": time.perf_counter() - t0,
            **extra}


def summarise(paths) -> str:
    import pandas as pd

    df = pd.DataFrame([json.loads(line) for p in paths for line in open(p) if line.strip()])
    lines = ["| set | method | n_init | accuracy mean ± sd | each seed (seed: accuracy) | s per fit |",
             "|---|---|---:|---:|---|---:|"]
    for (s, m, k), g in df.groupby(["set", "method", "n_init"], sort=False):
        g = g.sort_values("seed")
        each = ", ".join(f"{int(r.seed)}: {r.acc:.3f}" for r in g.itertuples())
        lines.append(f"| {s} | {m} | {k} | {g.acc.mean():.3f} ± {g.acc.std(ddof=1) if len(g) > 1 else 0:.3f} "
                     f"| {each} | {g.seconds.mean():.0f} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=SETS)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=["links", "uniform"])
    ap.add_argument("--n-init", type=int, default=1)
    ap.add_argument("--kw", nargs="+", default=[], metavar="KEY=VALUE",
                    help="route settings added to every BayesSCDC/SCDC fit (values as Python literals)")
    ap.add_argument("--model-kw", nargs="+", default=[], metavar="KEY=VALUE",
                    help="model fields added to every BayesSCDC/SCDC model (values as Python literals)")
    ap.add_argument("--out", default="bench_bayesscdc_step.jsonl")
    ap.add_argument("--summarise", nargs="+", metavar="JSONL")
    a = ap.parse_args(argv)
    if a.summarise:
        print(summarise(a.summarise))
        return
    if a.set is None:
        ap.error("--set is required unless --summarise")
    extra, model_kw = dict(_setting(kv) for kv in a.kw), dict(_setting(kv) for kv in a.model_kw)
    for seed in a.seeds:
        for m in a.methods:
            row = run(a.set, seed, m, a.n_init, *((extra, model_kw) if m != "PCKMeans" else ()))
            print(json.dumps(row), flush=True)
            with open(a.out, "a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
