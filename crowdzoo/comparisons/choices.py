"""``choices``: best-of-k choices modelled as choices against rank-breaking them into pairs.

Every repeat (one seed) simulates a best–worst survey and a best-only one: 30 items, utilities
f ~ N(0, 1.5²) without features, 200 training rows of k = 4 items (each set drawn uniformly) and
1000 held-out rows, from the choice model of :mod:`crowdzoo.gp.choice` with the logit (Bradley–
Terry) and the probit (Thurstone) link. Each model is
fitted twice to the same training rows:

* **choices**: the choice likelihood on ``ChoiceData`` (best, and worst given the best);
* **rank-breaking**: ``data.rank_breaking()``, each row as k − 1 (best-only) or 2k − 3 (best–worst)
  pairwise labels, the pairwise likelihood; its choice probabilities are the same choice formula on
  its utilities (``predict_choice``).

Models: Bradley–Terry (logit) and Thurstone (Bradley–Terry with the probit link), both by svi.
Scores: Kendall's τ of the posterior mean utilities against the truth; the posterior sd of the
utilities (centred per draw, the identified part) and the share of true centred utilities inside their
90 % interval (**coverage**); on the held-out rows the
**log loss** of the best, the **confidence gap** (mean of the largest predicted probability of a
row minus the share of rows whose most probable item was chosen: > 0 over-confident) and the
**ECE** (expected calibration error over 10 bins of every member's predicted probability).

``crowdzoo compare choices --repeats 5 --jobs 1 --out docs/choices-compare.md``
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

N_ITEMS, N_TRAIN, N_TEST, K, SD = 30, 200, 1000, 4, 1.5
HOW = ("choices", "rank-breaking")


def _models(quick: bool):
    from ..models import BradleyTerry

    svi = {"num_steps": 400 if quick else 1500, "n_draws": 200}
    return {"Bradley–Terry (logit)": ("logit", lambda: BradleyTerry(), "svi", svi),
            "Thurstone (probit)": ("probit", lambda: BradleyTerry(link="probit"), "svi", svi)}


def survey(link: str, worst: bool, seed: int):
    """(training ChoiceData, held-out ChoiceData, true utilities) of one simulated survey."""
    from ..data.simulate_choices import simulate_choices

    f = np.random.default_rng(seed + 100).normal(0.0, SD, N_ITEMS)
    data, _ = simulate_choices(N_ITEMS, N_TRAIN + N_TEST, K, n_features=0, link=link, worst=worst, f=f,
                               seed=seed)
    return data.subset(np.arange(N_TRAIN)), data.subset(np.arange(N_TRAIN, N_TRAIN + N_TEST)), f


def calibration(p: np.ndarray, mask: np.ndarray, best: np.ndarray, bins: int = 10) -> dict:
    """Log loss of the best, the confidence gap and the ECE of predicted choice probabilities ``p``
    (R, k_max) (module docstring)."""
    rows = np.arange(len(best))
    loss = -np.log(np.clip(p[rows, best], 1e-15, 1.0)).mean()
    top = p.argmax(1)
    gap = p.max(1).mean() - (top == best).mean()
    hit = np.zeros_like(p)
    hit[rows, best] = 1.0
    q, h = p[mask], hit[mask]
    which = np.minimum((q * bins).astype(int), bins - 1)
    n = np.bincount(which, minlength=bins)
    ece = np.abs(np.bincount(which, q, bins) - np.bincount(which, h, bins)).sum() / n.sum()
    return {"log loss": float(loss), "confidence gap": float(gap), "ECE": float(ece)}


def interval(draws: np.ndarray, f: np.ndarray) -> dict:
    """Mean posterior sd of the centred utilities and the 90 % intervals' coverage of the centred truth."""
    d = draws - draws.mean(1, keepdims=True)
    lo, hi = np.quantile(d, [0.05, 0.95], axis=0)
    fc = f - f.mean()
    return {"posterior sd": float(d.std(0).mean()), "coverage 90%": float(((fc >= lo) & (fc <= hi)).mean())}


def kendall(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau(a, b).statistic)


def run_one(seed: int, quick: bool = False) -> pd.DataFrame:
    import crowdzoo as cz

    rows = []
    for worst in (True, False):
        for name, (link, make, method, settings) in _models(quick).items():
            train, held, f = survey(link, worst, seed)
            ids = held.item_ids[held.sets.clip(0)]
            sets = [r[m].tolist() for r, m in zip(ids, held.mask, strict=True)]
            for how in HOW:
                data = train if how == "choices" else train.rank_breaking()
                t0 = time.perf_counter()
                post = cz.fit(make(), data, method=method, seed=seed, check_confidence=False, **settings)
                secs = time.perf_counter() - t0
                p = post.predict_choice(sets)
                vals = {"kendall tau": kendall(post.utilities()[0].to_numpy(), f),
                        **interval(post.f.numpy(), f),
                        **calibration(p, held.mask, held.best), "seconds": secs}
                rows += [dict(seed=seed, survey="best–worst" if worst else "best only", model=name, fit=how,
                              metric=m, value=v) for m, v in vals.items()]
    return pd.DataFrame(rows)


METRICS = ["kendall tau", "posterior sd", "coverage 90%", "log loss", "confidence gap", "ECE", "seconds"]


def summarise(df: pd.DataFrame) -> str:
    """Per survey, model and fit: each metric's mean ± sd over the seeds."""
    g = df.groupby(["survey", "model", "fit", "metric"], sort=False)["value"]
    mean, sd = g.mean().unstack(), g.std().fillna(0.0).unstack()
    lines = ["| survey | model | fit | " + " | ".join(METRICS) + " |",
             "|---|---|---|" + "---:|" * len(METRICS)]
    for key, row in mean.iterrows():
        cells = [f"{row[m]:.3f} ± {sd.loc[key, m]:.3f}" for m in METRICS]
        lines.append("| " + " | ".join(key) + " | " + " | ".join(cells) + " |")
    n = df["seed"].nunique()
    return "\n".join(lines) + (
        f"\n\n{n} seed(s), mean ± sd over them. {N_ITEMS} items, {N_TRAIN} training rows of k = {K}, "
        f"{N_TEST} held-out rows. Kendall τ of the mean utilities against the truth (higher is better); "
        "posterior sd of the centred utilities and the coverage of their 90 % intervals; "
        "held-out log loss of the best; confidence gap = mean largest predicted probability − share of "
        "rows whose most probable item was chosen (> 0: over-confident); ECE over 10 bins of every "
        "member's probability; seconds per fit.")
