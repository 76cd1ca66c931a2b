"""``crowdzoo demo``: simulate a preference problem, fit GPPL from CSV files as a user would, and write
a report with the command that reproduces it."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from .fit import run_fit
from .parser import _csv_options
from .plan import plan_fit
from .reading import load_csvs
from .report import write_report
from .runs import _check_out


def cmd_demo(args) -> int:
    import crowdzoo as cz

    out = Path(args.out)
    csv = argparse.ArgumentParser()
    _csv_options(csv)
    for k, v in vars(csv.parse_args([])).items():
        setattr(args, k, v)
    plan = plan_fit(args)
    # a demo folder is remade by the next demo; any other run in it needs --overwrite
    earlier_demo = (out / "report.md").is_file() and (out / "data" / "pairs.csv").is_file()
    _check_out(out, args.overwrite or earlier_demo)
    n_items, n_pairs = (40, 400) if args.quick else (100, 2000)
    data, f_true = cz.simulate_gppl(n_items=n_items, n_pairs=n_pairs, n_features=2, seed=args.seed)
    (out / "data").mkdir(parents=True, exist_ok=True)
    data.to_frame().to_csv(out / "data" / "pairs.csv", index=False)
    data.items_frame().rename_axis("id").to_csv(out / "data" / "items.csv")
    args.test_fraction = args.test_fraction or 0.2
    pairs, data = load_csvs(out / "data" / "pairs.csv", out / "data" / "items.csv", args)
    metrics = run_fit(data, args, out, f_true=f_true, plan=plan, pairs=pairs)
    top = pd.read_csv(out / "utilities.csv").head(10)
    quick = " --quick" if args.quick else ""
    learned = cz.load(out / "posterior.pt").settings.get("learned_lengthscale")
    kernel = ("median-heuristic length-scales" if learned is None else "length-scales learned from the "
              f"median heuristic's (ℓ = {', '.join(f'{v:.2g}' for v in learned)})")
    report = [
        "# crowdzoo demo: GPPL on a simulated preference problem", "",
        f"Reproduce: `crowdzoo demo --out {args.out} --method {args.method} --seed {args.seed}{quick}`",
        "", f"- data: {n_items} items with 2-D features, {n_pairs} pairwise labels drawn from GPPL "
        f"(`crowdzoo.simulate_gppl`, seed {args.seed}); 20 % of the pairs held out",
        f"- model: GPPL, Matérn 3/2 kernel, {kernel}; route `{args.method}`", "",
        "| metric | value |", "|---|---:|",
        *[f"| {k} | {v:.3f} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in metrics.items()],
        "", "Top items by posterior mean utility:", "", _markdown(top), "",
        "Files: `utilities.csv`, `predictions.csv`, `metrics.json`, `posterior.pt` "
        "(`crowdzoo.load`), `data/`.",
    ]
    report += ["", "Posterior diagnostics (r̂/ESS or optimisation trace, PPC, calibration, PSIS-LOO): "
               f"`diagnostics.html`, remade by `crowdzoo report {args.out} -o {args.out}/diagnostics.html`."]
    (out / "report.md").write_text("\n".join(report) + "\n")
    diag = write_report(out, out / "diagnostics.html")
    print(f"demo: held-out accuracy {metrics['test_accuracy']:.3f}, CEE {metrics['test_cee']:.3f}, "
          f"Kendall tau vs truth {metrics['kendall_tau_vs_truth']:.3f}")
    print(f"demo: report written to {out / 'report.md'}; diagnostics ({diag.verdict}) to "
          f"{out / 'diagnostics.html'}")
    return 0


def _cell(v) -> str:
    """A table cell as Markdown text: floats to 3 decimals, a literal pipe escaped (``|P − P_nuts|``
    would otherwise split the cell)."""
    return (f"{v:.3f}" if isinstance(v, float | np.floating) else str(v)).replace("|", "\\|")


def _markdown(df: pd.DataFrame) -> str:
    head = "| " + " | ".join(_cell(c) for c in df.columns) + " |\n|" + "---|" * len(df.columns)
    rows = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, *rows])
