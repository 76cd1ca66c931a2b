"""GPPL and crowdGPPL with their defaults on UKPConvArg's held-out topics (a cold-start task).

Fold ``seed`` of ``crowdzoo.comparisons.ukpconvarg`` is held out (its arguments are never seen in
training, so only the 64-D TF-IDF + SVD features can predict them); each model is fitted by natgrad with
its defaults to the crowd labels of the other 31 folds and scored on the held-out labels of workers
with training labels, each by that worker's prediction (GPPL: the pooled one): log loss (a coin
scores .693) and accuracy. Prints one markdown row per fit and a table of means over the folds, with
each fit's learned length-scales against their start (median of the D values).

    python benchmarks/bench_ukpconvarg_defaults.py --seeds 0 1 2 3
"""
from __future__ import annotations

import argparse
import time

import numpy as np

MODELS = {
    "GPPL()": lambda cz: cz.GPPL(),
    "GPPL(item_residual=False)": lambda cz: cz.GPPL(item_residual=False),
    "CrowdGPPL()": lambda cz: cz.CrowdGPPL(),
}


def one(name: str, seed: int) -> dict:
    import warnings

    import torch

    import crowdzoo as cz
    from crowdzoo import metrics
    from crowdzoo.comparisons import ukpconvarg as uk

    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    u, F = uk._load(str(uk.DATA_DIR), 64)
    fold = u.folds[seed % len(u.folds)]
    train = u.crowd[u.crowd.fold != fold]
    test = u.crowd[(u.crowd.fold == fold) & u.crowd.worker.isin(set(train.worker))]
    data = uk.training_data(u, F, fold)
    t0 = time.perf_counter()
    post = cz.fit(MODELS[name](cz), data, method="natgrad", seed=seed, progress_bar=False)
    secs = time.perf_counter() - t0
    users = None if name.startswith("GPPL") else test.worker.to_numpy()
    kw = {} if users is None else {"users": users}
    p = post.predict_proba(test.a.to_numpy(), test.b.to_numpy(), **kw)
    y = test.y.to_numpy()
    st = post.settings
    start, learned = st.get("start_lengthscale"), st.get("learned_lengthscale", st.get("pooled_lengthscale"))
    return dict(model=name, seed=seed, cee=metrics.cross_entropy(y, p), acc=metrics.accuracy(y, p),
                secs=secs,
                start=np.median(start) if start is not None else float("nan"),
                learned=np.median(learned) if learned is not None else float("nan"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3])
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    args = ap.parse_args()
    rows = []
    print("| model | fold seed | log loss | acc | median start ℓ | median learned ℓ | s |")
    print("|---|---|---|---|---|---|---|")
    for name in args.models:
        for seed in args.seeds:
            r = one(name, seed)
            rows.append(r)
            print(f"| {name} | {seed} | {r['cee']:.3f} | {r['acc']:.3f} | {r['start']:.3g} | "
                  f"{r['learned']:.3g} | {r['secs']:.0f} |", flush=True)
    print(f"\n| model | log loss (mean ± sd over {len(args.seeds)} folds) | acc |")
    print("|---|---|---|")
    for name in args.models:
        cee = np.array([r["cee"] for r in rows if r["model"] == name])
        acc = np.array([r["acc"] for r in rows if r["model"] == name])
        sd = cee.std(ddof=1) if len(cee) > 1 else 0.0
        print(f"| {name} | {cee.mean():.3f} ± {sd:.3f} | {acc.mean():.3f} |")


if __name__ == "__main__":
    main()
