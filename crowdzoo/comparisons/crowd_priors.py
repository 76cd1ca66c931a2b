"""crowdGPPL's scale priors on the calibration battery: the default against the alternatives it was
chosen over.

Each variant is ``CrowdGPPL(**settings)`` with its default route (and its route settings), scored on the
battery's crowds by :func:`crowdzoo.comparisons.calibration.score_models` beside pooled GPPL at the
median heuristic's kernel (``learn_kernel=False``); held-out log loss, ECE, accuracy, seconds. The
variants: the default (the components' scale chosen from the data,
:mod:`crowdzoo.models.crowdgppl.scales`), each of its two candidates alone (Gamma(2, 2) on s_t and
Gamma(2, 2/√C) on s_v,c and s_w,c; the side with fewer inducing values held broad), the paper's Sushi
priors (Gamma(1, 100) and Gamma(1, 10), every item inducing as the default is), Gamma(2, 2) everywhere,
and shape 1 on the components (rate 1, or 2/√C).

``crowdzoo compare crowdgppl-priors --repeats 2 --jobs 2 --out docs/crowdgppl-priors.md``; ``--quick``
leaves out the two largest crowds.
"""
from __future__ import annotations

import pandas as pd

from . import calibration
from .markdown import cell

#: name → (CrowdGPPL settings, natgrad route settings)
VARIANTS = {
    "default: the components' scale chosen from the data": ({}, {}),
    "Gamma(2, 2) on s_t, Gamma(2, 2/√C) on s_v, s_w (select_scales=False)": ({}, {"select_scales": False}),
    "the fewer side's scale held broad (select_scales='held')": ({}, {"select_scales": "held"}),
    "paper: Gamma(1, 100) on s_t, Gamma(1, 10) on s_v, s_w": (dict(shape_t0=1, rate_t0=100, shape_v0=1,
                                                                   rate_v0=10, shape_w0=1, rate_w0=10), {}),
    "Gamma(2, 2) everywhere": (dict(rate_v0=2, rate_w0=2), {}),
    "Gamma(1, 1) on s_v, s_w": (dict(shape_v0=1, rate_v0=1, shape_w0=1, rate_w0=1), {}),
    "Gamma(1, 2/√C) on s_v, s_w": (dict(shape_v0=1, shape_w0=1), {}),
}
LARGE = ("many-per-item", "sparse-big")


def run_one(seed: int, quick: bool = False) -> pd.DataFrame:
    from ..models import GPPL, CrowdGPPL

    models = {"GPPL (pooled)": ("gppl", GPPL(), {"learn_kernel": False})}  # the median heuristic
    models.update({name: ("crowdgppl", CrowdGPPL(**kw), route) for name, (kw, route) in VARIANTS.items()})
    crowds = [c for c in calibration.CROWDS if not (quick and c in LARGE)]
    return calibration.score_models(models, crowds, seed)


def summarise(df: pd.DataFrame) -> str:
    """Held-out log loss per crowd (rows) and variant (columns), means over seeds; then each variant's
    mean over the crowds and the number of crowds where it is above pooled GPPL's + 0.01."""
    wide = df.pivot_table(index="crowd", columns="model", values="log loss", sort=False)
    cols = list(dict.fromkeys(df["model"]))
    lines = ["| crowd | oracle | " + " | ".join(cell(c) for c in cols) + " |",
             "|---|---:|" + "---:|" * len(cols)]
    oracle = df.groupby("crowd", sort=False)["oracle"].mean()
    for crowd, r in wide.iterrows():
        lines.append(f"| {crowd} | {oracle[crowd]:.3f} | " + " | ".join(f"{r[c]:.3f}" for c in cols) + " |")
    gppl = wide["GPPL (pooled)"]
    lines.append("| mean over the crowds | | " + " | ".join(f"{wide[c].mean():.3f}" for c in cols) + " |")
    lines.append("| crowds above GPPL + 0.01 | | " + " | ".join(
        str(int((wide[c] > gppl + 0.01).sum())) for c in cols) + " |")
    n = df["seed"].nunique()
    return "\n".join(lines) + f"\n\nHeld-out log loss of each crowd's decided labels, means over {n} seed(s)."
