"""GPPL's kernel on the calibration battery: the paper's median heuristic against learned length-scales.

Pooled GPPL (every user's labels together) on every battery crowd with item features
(:mod:`crowdzoo.comparisons.calibration`). The natgrad route four ways: the median heuristic (ℓ fixed,
``learn_kernel=False``, the paper's choice), learned length-scales with the earlier step settings
(``kernel_lr=0.1``, ``rho_min=0.5``, ``tol=1e-4``), learned with the route's step settings at
``tol=1e-4``, and the route's defaults (learned, ``tol`` 3·10⁻⁴). The ep route two ways, the median
heuristic (its default) and ``learn_kernel=True``, on every crowd but the largest (:data:`NO_EP`, where
EP's cost grows with the pairs). Held-out log loss of the decided labels and seconds.

``crowdzoo compare gppl-kernel --repeats 2 --jobs 1 --out docs/gppl-kernel.md``
"""
from __future__ import annotations

import pandas as pd

from . import calibration

MEDIAN, DEFAULT = "natgrad, median heuristic", "natgrad default (learned, tol 3e-4)"
VARIANTS = {
    MEDIAN: {"learn_kernel": False},
    "natgrad learned, kernel_lr 0.1, rho_min 0.5, tol 1e-4": {"learn_kernel": True, "kernel_lr": 0.1,
                                                              "rho_min": 0.5, "tol": 1e-4},
    "natgrad learned, tol 1e-4": {"learn_kernel": True, "tol": 1e-4},
    DEFAULT: {},
    "ep, median heuristic (its default)": {"method": "ep"},
    "ep, learned": {"method": "ep", "learn_kernel": True},
}
#: crowds the ep variants skip: EP on 8000 pairs over 300 items takes minutes a fit
NO_EP = ("sparse-big",)


def crowds(quick: bool = False) -> list:
    names = [c for c, (panel, _) in calibration.CROWDS.items() if panel.features != "none"]
    return [c for c in names if c in calibration.QUICK] if quick else names


def run_one(seed: int, quick: bool = False) -> pd.DataFrame:
    from ..models import GPPL

    frames = []
    for name, settings in VARIANTS.items():
        where = [c for c in crowds(quick) if not (settings.get("method") == "ep" and c in NO_EP)]
        frames.append(calibration.score_models({name: ("gppl", GPPL(), settings)}, where, seed))
    return pd.concat(frames, ignore_index=True)


def summarise(df: pd.DataFrame) -> str:
    """Log loss and seconds per crowd (rows) and variant (columns), means over seeds; the means over the
    crowds, and over those every variant ran on; how often the default beats the median heuristic."""
    cols = [c for c in VARIANTS if c in set(df["model"])]
    ll = df.pivot_table(index="crowd", columns="model", values="log loss", sort=False)
    sec = df.pivot_table(index="crowd", columns="model", values="seconds", sort=False)
    oracle = df.groupby("crowd", sort=False)["oracle"].mean()

    def cell(table, crowd, c, fmt):
        v = table[c].get(crowd) if c in table else None
        return "—" if v is None or pd.isna(v) else format(v, fmt)

    head = " | ".join(f"{c}: log loss | s" for c in cols)
    lines = [f"| crowd | oracle | {head} |", "|---|---:|" + "---:|---:|" * len(cols)]
    for crowd in ll.index:
        cells = " | ".join(f"{cell(ll, crowd, c, '.3f')} | {cell(sec, crowd, c, '.2f')}" for c in cols)
        lines.append(f"| {crowd} | {oracle[crowd]:.3f} | {cells} |")
    every = ll.dropna().index
    for label, rows in (("mean over the crowds", ll.index), (f"mean over the {len(every)} crowds every "
                                                            "variant ran on", every)):
        means = " | ".join("— | —" if ll.loc[rows, c].isna().any() else
                           f"{ll.loc[rows, c].mean():.4f} | {sec.loc[rows, c].mean():.2f}" for c in cols)
        lines.append(f"| {label} | | {means} |")
    n = df["seed"].nunique()
    out = "\n".join(lines) + ("\n\nHeld-out log loss of each crowd's decided labels and seconds per fit, "
                              f"means over {n} seed(s); pooled GPPL.")
    if MEDIAN in ll and DEFAULT in ll:
        d = (ll[DEFAULT] - ll[MEDIAN]).round(3)
        out += (f" The default's log loss is below the median heuristic's on {int((d < 0).sum())} of "
                f"{len(d)} crowds, equal on {int((d == 0).sum())} (to three decimals), above on "
                f"{int((d > 0).sum())} (by at most {max(float(d.max()), 0.0):.3f}).")
    return out
