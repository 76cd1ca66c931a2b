"""``ties``: ties as a third outcome against ties as two half labels (and ties left out).

Every repeat (one seed) simulates a taste panel at two tie thresholds: 30 items with two features
(GPPL's prior, Matérn-3/2 at the median heuristic, s = 0.5) and 800 labels drawn from the ordinal
probit of :mod:`crowdzoo.gp.ordinal` at τ = 0.3 and τ = 0.8 (the table gives the share of ties
each makes); a quarter of the labels held out. Each model is fitted three ways to the same training rows,
``PairwiseData.from_frame(..., ties=...)`` with "model", "half" and "drop":

* **GPPL** (natgrad, the default route; the exact likelihood where ties are modelled, the default
  linearised one otherwise; the kernel fixed at the median heuristic, the truth's own);
* **Bradley–Terry** (probit link, map), without the features.

Held-out scores: the **three-way log loss** of every held-out label (ties included), a "half" or
"drop" fit scored by the probabilities it implies with the training share t of ties as its tie rate,
((1 − t) p, t, (1 − t)(1 − p)) — the best constant tie rate it could offer; the **decided log loss**
(the decided held-out labels against P(a ≻ b), given no tie for a tie fit); τ's estimate; seconds.

``crowdzoo compare ties --repeats 3 --jobs 1 --out docs/ties-compare.md``
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

TAUS = (0.3, 0.8)
HOW = ("model", "half", "drop")
N_ITEMS, N_LABELS, TEST = 30, 800, 0.25


def panel(tau: float, seed: int):
    """(labels frame (a, b, y with y = ½ a tie), items frame, held-out mask) of one simulated panel."""
    from ..data.simulate import simulate_gppl

    data, _ = simulate_gppl(n_items=N_ITEMS, n_pairs=N_LABELS, s=0.5, tau=tau, seed=seed)
    frame = data.to_frame()
    test = np.random.default_rng(seed + 1).random(len(frame)) < TEST
    return frame, data.items_frame(), test


def _models():
    from ..models import GPPL, BradleyTerry

    return {"GPPL (natgrad)": (lambda: GPPL(), "natgrad", True, {"learn_kernel": False}),
            "Bradley–Terry (map)": (lambda: BradleyTerry(link="probit"), "map", False, {})}


def score(post, held: pd.DataFrame, tie_share: float) -> dict:
    """Held-out three-way and decided log loss of ``post`` (module docstring)."""
    a, b, y = held["a"].to_numpy(), held["b"].to_numpy(), held["y"].to_numpy(dtype=float)
    if getattr(post, "tau", None) is not None:
        probs = post.predict_outcomes(a, b).to_numpy()
    else:
        p = post.predict_proba(a, b)
        probs = np.column_stack([(1 - tie_share) * p, np.full_like(p, tie_share), (1 - tie_share) * (1 - p)])
    k = np.rint(2 * (1 - y)).astype(np.int64)  # a ≻ b: 0, tie: 1, b ≻ a: 2
    three = -np.log(np.clip(probs[np.arange(len(y)), k], 1e-15, 1.0)).mean()
    dec = y != 0.5
    p_dec = np.clip(probs[dec, 0] / (probs[dec, 0] + probs[dec, 2]), 1e-15, 1 - 1e-15)
    decided = -np.mean(y[dec] * np.log(p_dec) + (1 - y[dec]) * np.log1p(-p_dec))
    return {"three-way log loss": float(three), "decided log loss": float(decided)}


def run_one(seed: int, quick: bool = False) -> pd.DataFrame:
    import crowdzoo as cz

    rows = []
    for tau in TAUS[-1:] if quick else TAUS:
        frame, items, test = panel(tau, seed)
        train, held = frame[~test], frame[test]
        share = float((train["y"] == 0.5).mean())
        for name, (make, method, features, settings) in _models().items():
            for how in HOW:
                data = cz.PairwiseData.from_frame(train, items if features else None, ties=how)
                t0 = time.perf_counter()
                post = cz.fit(make(), data, method=method, seed=seed, check_confidence=False, **settings)
                vals = {**score(post, held, share), "seconds": time.perf_counter() - t0,
                        "tau": float(post.tau.mean()) if getattr(post, "tau", None) is not None else np.nan}
                rows += [dict(seed=seed, tau_true=tau, tie_share=share, model=name, ties=how, metric=m,
                              value=v) for m, v in vals.items()]
    return pd.DataFrame(rows)


def summarise(df: pd.DataFrame) -> str:
    """Per τ, model and ties: each metric's mean ± sd over the seeds."""
    df = _with_gaps(df)
    g = df.groupby(["tau_true", "model", "ties", "metric"], sort=False)["value"]
    mean, sd = g.mean().unstack(), g.std().fillna(0.0).unstack()
    metrics = ["three-way log loss", "three-way gap", "decided log loss", "decided gap", "tau", "seconds"]
    lines = ["| τ (tie share) | model | ties | " + " | ".join(metrics) + " |",
             "|---|---|---|" + "---:|" * len(metrics)]
    share = df.groupby("tau_true")["tie_share"].mean()
    for (tau, model, how), row in mean.iterrows():
        cells = ["–" if np.isnan(row[m]) else f"{row[m]:.3f} ± {sd.loc[(tau, model, how), m]:.3f}"
                 for m in metrics]
        lines.append(f"| {tau:g} ({share[tau]:.0%}) | {model} | {how} | " + " | ".join(cells) + " |")
    n = df["seed"].nunique()
    return "\n".join(lines) + (
        f"\n\n{n} seed(s), mean ± sd over them. Held-out labels: three-way log loss (every label, ties "
        "included; 'half' and 'drop' fits scored with the training tie share as their tie probability) and "
        "decided log loss (P(a ≻ b), given no tie for the tie model); a gap is the fit's loss minus the tie "
        "model's on the same seed (positive: the tie model is better); τ: the tie model's estimate "
        "(natgrad's and map's point); seconds per fit.")


def _with_gaps(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with rows "three-way gap" and "decided gap": each fit's loss minus the tie model's (same
    seed, τ and model)."""
    keys = ["seed", "tau_true", "model"]
    gaps = []
    for metric in ("three-way log loss", "decided log loss"):
        part = df[df["metric"] == metric]
        ref = part[part["ties"] == "model"].set_index(keys)["value"]
        own = ref.reindex(pd.MultiIndex.from_frame(part[keys])).to_numpy()
        gaps.append(part.assign(metric=metric.split()[0] + " gap", value=part["value"].to_numpy() - own))
    return pd.concat([df, *gaps], ignore_index=True)


def figure(df: pd.DataFrame, path) -> None:
    """Held-out three-way and decided log loss per τ, model and ties (means ± sd over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = ["three-way log loss", "decided log loss"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    groups = list(dict.fromkeys(zip(df["tau_true"], df["model"], strict=True)))
    x = np.arange(len(groups))
    for ax, metric in zip(axes, metrics, strict=True):
        part = df[df["metric"] == metric]
        for k, how in enumerate(HOW):
            s = part[part["ties"] == how].groupby(["tau_true", "model"], sort=False)["value"]
            m, e = s.mean().reindex(groups), s.std().fillna(0.0).reindex(groups)
            ax.bar(x + (k - 1) * 0.27, m, 0.27, yerr=e, capsize=2, label=f"ties={how!r}")
        ax.set_xticks(x, [f"τ={t:g}\n{m}" for t, m in groups], fontsize=7)
        ax.set_title(f"held-out {metric} (lower is better)", fontsize=9)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
