"""Does a fit claim more certainty than its data support? A check run by :func:`crowdzoo.fit`.

A fit whose scale ran away (crowdGPPL's consensus under the paper's priors with one free utility per
item: E[s_t] ≈ 4·10⁻⁴) predicts its own training labels almost perfectly — in-sample log loss .007 —
and new labels worse than a coin. Nothing in-sample shows it: the labels it fits are the ones it
was fitted to, and PSIS-LOO from the draws of a mean-field approximation is too unreliable to read
(on the calibration battery it failed for well-calibrated default fits as often as for runaways).

So the check has two stages. The cheap one reads the fit's predictions on (up to
:data:`SAMPLE` of) its training labels: when at least :data:`CONFIDENT_SHARE` of them are predicted
with P > .99 either way, the fit *could* be over-confident — or the labels could be near
deterministic (pairs taken from full rankings). The second stage tells the two apart honestly: it
refits the same model, route and settings without a tenth of the labels and scores them. A refit
that predicts those held-out labels worse than a coin (log loss > log 2) while claiming near
certainty on its training labels is over-confident: :class:`~crowdzoo.errors.OverconfidenceWarning`.

The result is kept in ``posterior.settings["confidence"]`` (the report shows it as a check). Refits
are skipped for sampling routes (NUTS: the exact posterior, which a scale prior may make heavy-tailed
but not over-confident in this way; the DPM's Gibbs sampler, whose communities' utilities are EP's at
the model's fixed scale, with no scale to run away), for a shard of a distributed fit, and above
:data:`MAX_REFIT` labels (the refit would double a long fit; the first stage's share is still recorded).
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..errors import OverconfidenceWarning

#: training labels whose predictions the first stage reads (a seeded sample beyond this many)
SAMPLE = 5000
#: the share of training labels predicted beyond .99 either way that calls for a refit
CONFIDENT_SHARE = 0.2
#: the refit holds out this share of the labels
HOLD_OUT = 0.1
#: no refit above this many labels
MAX_REFIT = 50_000
#: routes that sample the model's own posterior (no refit)
SAMPLERS = ("nuts", "gibbs")


def _predict(post, frame, users: bool) -> np.ndarray:
    kw = {"users": frame["user"].to_numpy()} if users and "user" in frame else {}
    return np.asarray(post.predict_proba(frame["a"].to_numpy(), frame["b"].to_numpy(), **kw), dtype=float)


def _decided(data, rows: np.ndarray) -> np.ndarray:
    """The labels of ``rows`` that are not ties (a tie kept as a third outcome has y = ½): both stages
    score P(a ≻ b | not a tie) on decided labels, a two-way question whose coin is log 2."""
    return rows[np.asarray(data.y)[rows] != 0.5]


def confident_share(post, data, users: bool, seed: int = 0) -> float:
    """The share of (up to :data:`SAMPLE` of) the decided training labels predicted beyond .99 either
    way, each label counted by its weight (``data.weights``)."""
    rows = _decided(data, np.arange(data.n_pairs))
    if rows.size == 0:
        return 0.0
    if rows.size > SAMPLE:
        rows = np.sort(np.random.default_rng(seed).choice(rows, SAMPLE, replace=False))
    p = _predict(post, data.subset(rows).to_frame(), users)
    return float(np.average(np.maximum(p, 1 - p) > 0.99, weights=data.label_weights[rows]))


def held_out_log_loss(refit, data, users: bool, seed: int = 0) -> float:
    """Refit without a random :data:`HOLD_OUT` of the labels (``refit(train)`` → posterior) and return
    its log loss on the decided ones among them, weighted by their weights (NaN if all are ties)."""
    rng = np.random.default_rng(seed)
    test = np.zeros(data.n_pairs, dtype=bool)
    test[rng.choice(data.n_pairs, max(1, int(round(HOLD_OUT * data.n_pairs))), replace=False)] = True
    post = refit(data.subset(np.flatnonzero(~test)))
    held = _decided(data, np.flatnonzero(test))
    if held.size == 0:
        return float("nan")
    frame = data.subset(held).to_frame()
    p = np.clip(_predict(post, frame, users), 1e-12, 1 - 1e-12)
    y = frame["y"].to_numpy(dtype=float)
    return float(-np.average(y * np.log(p) + (1 - y) * np.log1p(-p), weights=data.label_weights[held]))


def check(post, data, method: str, refit, users: bool, seed: int = 0) -> dict | None:
    """Both stages on a fitted ``post`` of ``data`` (module docstring); warns when over-confident and
    returns what it measured (None for data it does not apply to: links)."""
    if not hasattr(data, "n_pairs") or data.n_pairs < 20:
        return None
    out = {"confident_share": confident_share(post, data, users, seed), "threshold": CONFIDENT_SHARE}
    if out["confident_share"] < CONFIDENT_SHARE:
        return {**out, "verdict": "pass"}
    why = ("a sampling route" if method in SAMPLERS else "a shard of a distributed fit"
           if getattr(data, "label_range", None) is not None else
           f"more than {MAX_REFIT} labels" if data.n_pairs > MAX_REFIT else None)
    if why is not None:
        return {**out, "verdict": "skip", "skipped": f"no refit: {why}"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss = held_out_log_loss(refit, data, users, seed)
    out["held_out_log_loss"] = loss
    if not loss > math.log(2):  # NaN: every held-out label a tie, nothing to say
        return {**out, "verdict": "pass"}
    warnings.warn(OverconfidenceWarning(
        f"{post.name} {method}: the fit predicts {out['confident_share']:.0%} of its training labels with "
        f"P > .99, but a refit without {HOLD_OUT:.0%} of them scores those worse than a coin (log loss "
        f"{loss:.2f} > {math.log(2):.2f}): its predictions are far more confident than the data support. "
        "A scale prior that allows huge utilities can do this (e.g. the paper's priors with one free "
        "utility per item); try the model's default priors, fewer free utilities ({n_inducing}), or "
        "another route ({method})", settings=("n_inducing", "method")), stacklevel=3)
    return {**out, "verdict": "fail"}


def as_check(result: dict | None):
    """The stored result as a report :class:`~crowdzoo.diagnostics.checks.Check` (None: not run)."""
    from .checks import Check

    if not result:
        return None
    share = f"{result['confident_share']:.0%} of training labels beyond P = .99"
    value = share + (f"; refit's held-out log loss {result['held_out_log_loss']:.3f}"
                     if "held_out_log_loss" in result else "")
    rule = (f"below {result['threshold']:.0%} beyond .99 passes; otherwise a refit without {HOLD_OUT:.0%} of "
            f"the labels must score them better than a coin (log loss ≤ {math.log(2):.3f})")
    return Check("confidence (at fit time)", result["verdict"], value, rule, result.get("skipped", ""))
