"""The DPM with and without its item residual (``DPMCommunities(item_residual=True)``: each community's
exact item kernel K/s + σ_r² I) on calibration-battery crowds, each beside per-item Bradley–Terry, paired
by seed (the same simulated crowd for every model at a seed): the many-per-item crowd, whose item effects
the features do not explain, and crowds whose utilities are smooth in the features, where the residual
should not hurt.

    python benchmarks/bench_dpm_residual.py --seeds 0 1 2 --crowds many-per-item,noisy,decided \\
        --out docs/benchmarks.md

Each fit's scores are kept in ``--cache`` (a CSV, one row per crowd, seed and model), which later runs
reuse instead of refitting, so the slow many-per-item fits (minutes each on two shared cores) can be run
in pieces (``--variants``); the table is drawn from the cache (``--render-only``: without fitting what it
lacks, each crowd at the seeds where every model was scored).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(__file__))
from harness import machine, replace_section  # noqa: E402

HEAD = "<!-- bench_dpm_residual.py: this section is rewritten by it -->"
VARIANTS = {"dpm": {"item_residual": False}, "dpm + residual": {"item_residual": True},
            "dpm + learned residual": {"item_residual": "learned"}}
KEYS = ["crowd", "seed", "model"]


def score(crowd: str, seed: int, name: str) -> pd.DataFrame:
    import crowdzoo as cz
    from crowdzoo.comparisons.calibration import score_models

    if name == "bradley-terry":
        spec = ("bradley-terry", None, {})
    else:
        spec = ("dpm", cz.DPMCommunities(**VARIANTS[name]), {})
    return score_models({name: spec}, [crowd], seed)


def _both(ll, m, ref):
    """The seeds (index of ``ll``) at which models m and ref were both scored."""
    return ll.index[ll[m].notna() & ll[ref].notna()]


def render(df: pd.DataFrame, seeds, crowds) -> str:
    lines = [HEAD, "", "## The DPM's item residual", "",
             f"Machine: {machine()}. `python benchmarks/bench_dpm_residual.py --seeds "
             f"{' '.join(map(str, seeds))} --crowds {','.join(crowds)} --out docs/benchmarks.md` "
             f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).", "",
             "Calibration-battery crowds; the DPM's default (Gibbs) without and with the item residual "
             "(σ_r² = ¼ on each community's exact item kernel; *learned*: σ_r² at the pooled EP evidence's "
             "maximum). Each row at the seeds where it and its reference were both scored. Held-out log "
             "loss and accuracy, mean over seeds; differences paired by seed (mean ± standard error; "
             "negative log loss and positive "
             "accuracy differences favour the first; the *residual − none* and *learned − none* rows hold "
             "the residual's paired difference from the default in the two difference columns).", "",
             "| crowd | seeds | model | log loss | accuracy | log loss − BT | accuracy − BT "
             "| seeds better than BT (log loss) | seconds |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]

    def pm(x):
        se = x.std(ddof=1) / np.sqrt(x.notna().sum()) if x.notna().sum() > 1 else float("nan")
        return f"{x.mean():+.4f} ± {se:.4f}"

    for crowd in crowds:
        d = df[(df["crowd"] == crowd) & df["seed"].isin(seeds)]
        ll = d.pivot(index="seed", columns="model", values="log loss")
        acc = d.pivot(index="seed", columns="model", values="accuracy")
        sec = d.pivot(index="seed", columns="model", values="seconds")
        if ll.empty or "bradley-terry" not in ll:
            continue

        for m in [*VARIANTS, "bradley-terry"]:
            if m not in ll:
                continue
            bt = m == "bradley-terry"
            at = ll.index[ll[m].notna()] if bt else _both(ll, m, "bradley-terry")
            d_ll, d_acc = (ll[m] - ll["bradley-terry"])[at], (acc[m] - acc["bradley-terry"])[at]
            lines.append(f"| {crowd} | {', '.join(map(str, at))} | {m} | {ll[m][at].mean():.4f} | "
                         f"{acc[m][at].mean():.4f} | "
                         + ("–" if bt else pm(d_ll)) + " | " + ("–" if bt else pm(d_acc)) + " | "
                         + ("–" if bt else f"{int((d_ll < 0).sum())} of {d_ll.notna().sum()}")
                         + f" | {sec[m][at].mean():.0f} |")
        for m, what in (("dpm + residual", "residual − none"), ("dpm + learned residual", "learned − none")):
            if "dpm" in ll and m in ll:
                at = _both(ll, m, "dpm")
                diff = (ll[m] - ll["dpm"])[at]
                lines.append(f"| {crowd} | {', '.join(map(str, at))} | {what} | | | {pm(diff)} | "
                             f"{pm((acc[m] - acc['dpm'])[at])} | {int((diff < -1e-12).sum())} of "
                             f"{diff.notna().sum()} | |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--crowds", default="many-per-item,noisy,decided")
    ap.add_argument("--variants", default=",".join([*VARIANTS, "bradley-terry"]))
    ap.add_argument("--cache", default="benchmarks/results/dpm_residual.csv")
    ap.add_argument("--out", default=None)
    ap.add_argument("--render-only", action="store_true",
                    help="draw the table from the cache without fitting what it lacks (a crowd's table "
                         "then holds the seeds at which every model was scored)")
    args = ap.parse_args(argv)
    crowds = args.crowds.split(",")
    cache = pd.read_csv(args.cache) if os.path.exists(args.cache) else pd.DataFrame(columns=KEYS)
    for crowd in [] if args.render_only else crowds:
        for seed in args.seeds:
            for name in args.variants.split(","):
                done = (cache["crowd"] == crowd) & (cache["seed"] == seed) & (cache["model"] == name)
                if done.any():
                    continue
                row = score(crowd, seed, name)
                shown = row[["crowd", "seed", "model", "log loss", "accuracy", "seconds"]]
                print(shown.to_string(header=False), flush=True)
                fresh = pd.read_csv(args.cache) if os.path.exists(args.cache) else cache.iloc[:0]
                cache = pd.concat([fresh, row], ignore_index=True)
                os.makedirs(os.path.dirname(args.cache) or ".", exist_ok=True)
                cache.to_csv(args.cache, index=False)
    text = render(cache, args.seeds, crowds)
    print(text)
    if args.out:
        replace_section(args.out, HEAD, text)


if __name__ == "__main__":
    main()
