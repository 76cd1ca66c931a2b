"""The calibration battery's many-per-item crowd (150 items, 300 users, about 60 labels per item) over
more seeds than the battery's two: each GP model's default against per-item Bradley–Terry and the
items' win rates, as paired differences over seeds (the same simulated crowd for every model at a
seed), so that a gap of a few thousandths can be told from the seeds' noise.

    python benchmarks/bench_many_per_item.py --seeds 6 --models gppl,crowdgppl,collabgp,crowdbt-gp \\
        --out docs/benchmarks.md

``--models`` takes the zoo's names; Bradley–Terry and the win rates are always scored. Each
(model, seed) row is kept in ``--cache`` (``benchmarks/results/many_per_item.csv``) as soon as it is
scored, and rows already there are not refitted (fits are deterministic at their seed), so a slow
model can be added to the table later; ``--refit`` ignores the cache. The table shows every model in
the cache, each over the seeds asked for.
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
import time

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(__file__))
from harness import machine, replace_section  # noqa: E402

HEAD = "<!-- bench_many_per_item.py: this section is rewritten by it -->"
CROWD = "many-per-item"


CACHE = os.path.join(os.path.dirname(__file__), "results", "many_per_item.csv")
COLUMNS = ["seed", "model", "log loss", "accuracy", "seconds"]


def scores(seeds: int, models: list[str], cache: str | None = CACHE) -> pd.DataFrame:
    """Every (model, seed) row for seeds 0 … ``seeds`` − 1: the cache's, and the missing ones fitted
    (and appended to ``cache`` one by one)."""
    from crowdzoo.comparisons.calibration import _scores, crowd_data, score_models, win_rates

    have = pd.read_csv(cache) if cache and os.path.exists(cache) else pd.DataFrame(columns=COLUMNS)
    done = set(zip(have["model"], have["seed"]))
    for seed in range(seeds):
        todo = [m for m in [*models, "bradley-terry"] if (m, seed) not in done]
        new = (score_models({m: (m, None, {})}, [CROWD], seed) for m in todo)  # fitted one at a time
        if ("win rate", seed) not in done:
            train, test, *_ = crowd_data(CROWD, seed)
            decided = test[test["tie"] == "no"]
            rates = pd.DataFrame([dict(seed=seed, model="win rate", seconds=0.0,
                                       **_scores(win_rates(train, decided)))])
            new = itertools.chain(new, [rates])
        for row in new:
            row = row.reindex(columns=COLUMNS)
            print(row[["seed", "model", "log loss", "accuracy"]].to_string(header=False, index=False),
                  flush=True)
            have = pd.concat([have, row], ignore_index=True) if len(have) else row
            if cache:
                os.makedirs(os.path.dirname(cache), exist_ok=True)
                have.to_csv(cache, index=False)
    return have[have["seed"] < seeds].reset_index(drop=True)


def render(df: pd.DataFrame, seeds: int) -> str:
    wide = {k: df.pivot(index="seed", columns="model", values=k) for k in ("log loss", "accuracy")}
    lines = [HEAD, "", "## Many labels per item: GP models against per-item counts", "",
             f"Machine: {machine()}. `python benchmarks/bench_many_per_item.py --seeds {seeds} --models "
             f"{','.join(m for m in wide['log loss'].columns if m not in ('bradley-terry', 'win rate'))} "
             f"--out docs/benchmarks.md` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).", "",
             f"The calibration battery's many-per-item crowd at seeds 0–{seeds - 1}. Each model's "
             "default; the difference from Bradley–Terry is paired by seed (mean ± standard error over "
             "seeds; negative log loss and positive accuracy differences favour the model).", "",
             "| model | log loss | accuracy | log loss − BT | accuracy − BT "
             "| seeds better than BT (log loss) |",
             "|---|---:|---:|---:|---:|---:|"]
    ll, acc = wide["log loss"], wide["accuracy"]
    order = [m for m in ll.columns if m not in ("bradley-terry", "win rate")] + ["bradley-terry", "win rate"]
    for m in order:
        d_ll, d_acc = ll[m] - ll["bradley-terry"], acc[m] - acc["bradley-terry"]
        n = d_ll.notna().sum()

        def pm(x):
            return f"{x.mean():+.4f} ± {x.std(ddof=1) / np.sqrt(x.notna().sum()):.4f}"

        lines.append(f"| {m} | {ll[m].mean():.4f} | {acc[m].mean():.4f} | "
                     + ("–" if m == "bradley-terry" else pm(d_ll)) + " | "
                     + ("–" if m == "bradley-terry" else pm(d_acc)) + " | "
                     + ("–" if m == "bradley-terry" else f"{int((d_ll < 0).sum())} of {n}") + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--models", default="gppl,crowdgppl,collabgp,crowdbt-gp,dpm")
    ap.add_argument("--out", default=None)
    ap.add_argument("--cache", default=CACHE, help="CSV of scored (model, seed) rows (default %(default)s)")
    ap.add_argument("--refit", action="store_true", help="fit every row again, ignoring the cache")
    args = ap.parse_args(argv)
    if args.refit and os.path.exists(args.cache):
        os.remove(args.cache)
    df = scores(args.seeds, args.models.split(","), args.cache)
    text = render(df, args.seeds)
    print(text)
    if args.out:
        replace_section(args.out, HEAD, text)


if __name__ == "__main__":
    main()
