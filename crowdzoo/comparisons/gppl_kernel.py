"""GPPL's kernel on the calibration battery: the paper's median heuristic against learned length-scales.

Pooled GPPL (every user's labels together, its default natgrad route) on every battery crowd with item
features (:mod:`crowdzoo.comparisons.calibration`), three ways: the median heuristic (ℓ fixed, the
paper's choice), ``learn_kernel=True`` with the earlier step settings (``kernel_lr=0.1``, ``rho_min=0.5``)
and ``learn_kernel=True`` with the route's defaults (``kernel_lr=0.3``, floor 0.8 on the full batch).
Held-out log loss of the decided labels, seconds and iterations.

``crowdzoo compare gppl-kernel --repeats 2 --jobs 1 --out docs/gppl-kernel.md``
"""
from __future__ import annotations

import pandas as pd

from . import calibration

VARIANTS = {
    "median heuristic": {},
    "learn_kernel, kernel_lr 0.1, rho_min 0.5": {"learn_kernel": True, "kernel_lr": 0.1, "rho_min": 0.5},
    "learn_kernel (route defaults)": {"learn_kernel": True},
}


def crowds(quick: bool = False) -> list:
    names = [c for c, (panel, _) in calibration.CROWDS.items() if panel.features != "none"]
    return [c for c in names if c in calibration.QUICK] if quick else names


def run_one(seed: int, quick: bool = False) -> pd.DataFrame:
    from ..models import GPPL

    models = {name: ("gppl", GPPL(), settings) for name, settings in VARIANTS.items()}
    return calibration.score_models(models, crowds(quick), seed)


def summarise(df: pd.DataFrame) -> str:
    """Log loss and seconds per crowd (rows) and variant (columns), means over seeds."""
    cols = list(VARIANTS)
    ll = df.pivot_table(index="crowd", columns="model", values="log loss", sort=False)
    sec = df.pivot_table(index="crowd", columns="model", values="seconds", sort=False)
    head = " | ".join(f"{c}: log loss | s" for c in cols)
    lines = [f"| crowd | oracle | {head} |", "|---|---:|" + "---:|---:|" * len(cols)]
    oracle = df.groupby("crowd", sort=False)["oracle"].mean()
    for crowd in ll.index:
        cells = " | ".join(f"{ll.loc[crowd, c]:.3f} | {sec.loc[crowd, c]:.2f}" for c in cols)
        lines.append(f"| {crowd} | {oracle[crowd]:.3f} | {cells} |")
    means = " | ".join(f"{ll[c].mean():.3f} | {sec[c].mean():.2f}" for c in cols)
    lines.append(f"| mean over the crowds | | {means} |")
    n = df["seed"].nunique()
    return "\n".join(lines) + ("\n\nHeld-out log loss of each crowd's decided labels and seconds per fit, "
                               f"means over {n} seed(s); pooled GPPL, natgrad.")
