"""Simulation-based calibration of several models and routes at once (docs/sbc.md): each
MODEL:ROUTE:S[:KEY=VALUE,...] runs S simulations as ``crowdzoo compare sbc MODEL --route ROUTE
--sims S`` does (the same seeds, hence the same ranks). KEY=VALUE are settings of the route on top
of the check's (a Python literal, or for ``guide`` the name of a Pyro AutoGuide), and the route is
then named with them in the tables. The tidy rows of all of them go to one CSV, their table to
stdout and their rank histograms to a PNG beside the CSV.

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/bench_sbc.py gppl:nuts:50 gppl:natgrad:100 \
        gppl:svi:50:guide=AutoNormal ... [--draws 99] [--jobs 2] [--out docs/sbc.csv]
    python benchmarks/bench_sbc.py --tabulate docs/sbc.csv [more.csv ...] [--out docs/sbc.csv]

``--tabulate``: put together CSVs written before (by this script or by ``crowdzoo compare sbc
--out``) instead of running.
"""
import argparse
from pathlib import Path

import pandas as pd

from crowdzoo.comparisons import run, sbc


def settings_of(text: str) -> dict:
    """KEY=VALUE,... as route settings: Python literals, and ``guide`` by AutoGuide class name."""
    import ast

    import pyro.infer.autoguide as autoguide

    out = {}
    for pair in text.split(","):
        key, _, value = pair.partition("=")
        out[key] = getattr(autoguide, value) if key == "guide" else ast.literal_eval(value)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", help="MODEL:ROUTE:SIMS[:KEY=VALUE,...]")
    ap.add_argument("--draws", type=int, default=99)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--tabulate", nargs="+", default=None, help="CSVs to put together instead of running")
    ap.add_argument("--out", default="docs/sbc.csv")
    args = ap.parse_args()
    if args.tabulate:
        df = pd.concat([pd.read_csv(p) for p in args.tabulate], ignore_index=True)
    else:
        frames = []
        for item in args.runs:
            model, route, sims, *extra = item.split(":")
            settings = settings_of(extra[0]) if extra else {}
            label = f"{route} ({extra[0]})" if extra else None
            check = sbc.Check(model, route, draws=args.draws, settings=settings, label=label)
            df, table = run(check, repeats=int(sims), jobs=args.jobs)
            print(table, flush=True)
            frames.append(df)
        df = pd.concat(frames, ignore_index=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False, float_format="%.6g")
    sbc.figure(df, out.with_suffix(".png"))
    print(sbc.summarise(df))


if __name__ == "__main__":
    main()
