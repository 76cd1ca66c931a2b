"""crowdBT–GP's options on the calibration battery: held-out log loss of each variant beside pooled
GPPL's (its default) and the oracle, mean over seeds.

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/bench_crowdbt_defaults.py [--crowds a b] [--seeds 0 1]
        [--variants paper learned ...] [--no-gppl] [--out docs/crowdbt-defaults.csv]

Variants (fields of :class:`crowdzoo.CrowdBTGP`): ``paper`` (:meth:`CrowdBTGP.paper`: median heuristic,
grid over σ_f², σ_n², g alone, ties counted against reliability, reliability prior Beta(4, 1));
``+ties`` (ties say nothing of reliability); under the reliability prior Beta(49, 1) the paper's and
each of ``learn_kernel`` and ``item_posterior`` alone; all changes under one Beta(4, 1), Beta(49, 1),
Beta(4, 1/4), Beta(8, 1/2); and the default (all changes, reliabilities under the mixture 0.9 Beta(50,
1/20) + 0.1 Beta(1, 1)). GPPL's default beside them unless
``--no-gppl`` (the docs' bound is GPPL's battery row + 0.01).
"""
import argparse
import time

import pandas as pd
import torch

from crowdzoo.comparisons.calibration import CROWDS, score_models
from crowdzoo.models import CrowdBTGP

VARIANTS = {
    "paper": CrowdBTGP.paper,
    "+ties": lambda: CrowdBTGP.paper(tie_reliability=False),
    "paper, B(49,1)": lambda: CrowdBTGP.paper(reliability_prior=(49.0, 1.0)),
    "+kernel, B(49,1)": lambda: CrowdBTGP.paper(reliability_prior=(49.0, 1.0), learn_kernel=True),
    "+item, B(49,1)": lambda: CrowdBTGP.paper(reliability_prior=(49.0, 1.0), item_posterior=True),
    "all, B(4,1)": lambda: CrowdBTGP(reliability_prior=(4.0, 1.0), reliable_share=1.0),
    "all, B(49,1)": lambda: CrowdBTGP(reliability_prior=(49.0, 1.0), reliable_share=1.0),
    "all, B(4,1/4)": lambda: CrowdBTGP(reliability_prior=(4.0, 0.25), reliable_share=1.0),
    "all, B(8,1/2)": lambda: CrowdBTGP(reliability_prior=(8.0, 0.5), reliable_share=1.0),
    "default": CrowdBTGP,  # all three, 0.9 Beta(50, 1/20) + 0.1 Beta(1, 1)
}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--crowds", nargs="*", default=list(CROWDS))
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1])
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS))
    ap.add_argument("--no-gppl", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    models = {v: ("crowdbt-gp", VARIANTS[v](), {}) for v in args.variants}
    if not args.no_gppl:
        models["gppl"] = ("gppl", None, {})
    frames = []
    for seed in args.seeds:
        t0 = time.perf_counter()
        frames.append(score_models(models, crowds=args.crowds, seed=seed))
        print(f"seed {seed}: {time.perf_counter() - t0:.0f} s", flush=True)
    df = pd.concat(frames, ignore_index=True)
    if args.out:
        df.to_csv(args.out, index=False)
    loss = df.pivot_table(index="crowd", columns="model", values="log loss", aggfunc="mean")
    loss["oracle"] = df.groupby("crowd")["oracle"].mean()
    secs = df.pivot_table(index="crowd", columns="model", values="seconds", aggfunc="mean")
    cols = [c for c in [*args.variants, "gppl", "oracle"] if c in loss]
    print(loss.loc[[c for c in args.crowds if c in loss.index], cols].round(3).to_string())
    print(secs.loc[[c for c in args.crowds if c in secs.index]].round(2).to_string())
    if "error" in df:
        print(df[df["error"].notna()][["crowd", "model", "error"]])


if __name__ == "__main__":
    main()
