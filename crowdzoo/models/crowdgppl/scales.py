"""How large the personal part may be: the components' scale chosen from the data (crowdGPPL's natgrad
route by default).

The personal part Σ_c v_c,a w_c,j of Eq. 5 is bilinear: (k v_c, w_c / k) gives the same utilities for
every k, so the labels identify only the product of the two sides' scales 1 / (s_v,c s_w,c). Under the
mean-field q of Eq. 20 each q(s) (Eq. 15) learns its side's scale from that side's own inducing values,
M of them for s_v,c and M_u for s_w,c. The side with few values (6 items against 250 respondents)
keeps its prior's scale, and if that is small, q(v_c) and q(w_c) both stay near the prior — every
component switched off, the personal part shrunk far more than the labels say. That state is a fixed
point of Alg. 2 and the bound (Eq. 31) prefers it, so the bound cannot choose the scale.

Holding the scale of the side with fewer inducing values broad and nearly fixed, s ~ Gamma(100, 1000)
(E[s] = 1/10, that side's sd ≈ 3), removes the non-identified direction: the other side's q(s_c) then
carries each component's magnitude from its many values (ARD over components). Where the personal
part is weak or the labels few, the held scale over-fits instead. Neither prior is right for every
crowd, so :func:`select` fits both on 80 % of the labels, scores the other 20 %, and keeps the held
scale only where its held-out log loss is lower by more than twice the paired standard error — the
weakly informative Gamma(2, 2/√C) of :meth:`~crowdzoo.CrowdGPPL.component_rate` stays otherwise.
"""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from ...errors import DataError, NumericalError

#: the held side's Gamma(shape, rate): E[s] = 1/10, sd of E[s] 1 %: a broad scale, nearly fixed
HELD_SHAPE, HELD_RATE = 100.0, 1000.0
#: the share of labels the selection holds out, and the most labels it runs on
HOLD_OUT, MAX_LABELS = 0.2, 50_000
#: fewest decided held-out labels for a choice (fewer: the weakly informative prior stays)
MIN_HELD = 50
#: iterations of each candidate's fit at most (a held scale that needs more over-fits)
MAX_ITER = 200
#: the held scale is kept where it lowers the held-out log loss by more than this many paired se
MARGIN_SE = 2.0


def leaves_scales_to_data(model) -> bool:
    """Whether ``model`` leaves both component scales' priors at their defaults (so the route may
    choose them); a prior set by the user is kept as given."""
    defaults = {f.name: f.default for f in dataclasses.fields(model)}
    keys = ("shape_v0", "rate_v0", "shape_w0", "rate_w0", "prior_v", "prior_w")
    return all(getattr(model, k) == defaults[k] for k in keys)


def held_side(setup) -> str:
    """"v" (items) or "w" (users): the side with fewer inducing values, whose scale is held."""
    M_u = setup.users.M if setup.users is not None else setup.n_users
    return "v" if setup.items.M <= M_u else "w"


def held(model, side: str):
    """``model`` with the scale of ``side``'s components held broad (module docstring)."""
    return dataclasses.replace(model, **{f"shape_{side}0": HELD_SHAPE, f"rate_{side}0": HELD_RATE})


def applies(data) -> str | None:
    """Why :func:`select` does not run on ``data`` (None: it does)."""
    if getattr(data, "label_range", None) is not None:
        return "a shard of a distributed fit"
    if data.n_pairs > MAX_LABELS:
        return f"more than {MAX_LABELS} labels"
    if HOLD_OUT * np.count_nonzero(np.asarray(data.y) != 0.5) < MIN_HELD:
        return f"fewer than {MIN_HELD} held-out labels"
    return None


def _log_loss(post, test) -> np.ndarray:
    """Each decided held-out label's log loss under ``post``, times its weight over the mean weight."""
    keep = np.flatnonzero(np.asarray(test.y) != 0.5)
    w = np.asarray(test.label_weights, dtype=float)[keep]
    a, b = test.item_ids[test.a[keep]], test.item_ids[test.b[keep]]
    p = np.asarray(post.predict_proba(a, b, users=test.user_ids[test.users[keep]]), dtype=float)
    p = np.clip(p, 1e-12, 1 - 1e-12)
    y = np.asarray(test.y)[keep]
    return -(y * np.log(p) + (1 - y) * np.log1p(-p)) * w / w.mean()


def select(model, data, fit, seed: int = 0, mode: bool | str | None = None):
    """``(model, record)``: ``model`` or :func:`held` of it, chosen by held-out log loss (module
    docstring). ``fit(model, train)`` fits a candidate; ``record`` says what was compared. ``mode``
    "held": the held scale without a choice (where the component priors are left at their defaults)."""
    from ...data.split import split_pairs

    why = "component priors given" if not leaves_scales_to_data(model) else (
        None if mode == "held" else applies(data))
    if why is not None:
        return model, {"choice": "prior", "skipped": why}
    side = held_side(model.setup(data, seed=seed))
    if mode == "held":
        return held(model, side), {"choice": "held", "held_side": "items" if side == "v" else "users",
                                   "skipped": "select_scales='held'"}
    train, test = split_pairs(data, HOLD_OUT, seed=seed + 7919)
    loss = {"prior": _log_loss(fit(model, train), test)}
    try:
        with warnings.catch_warnings():  # a candidate's own warnings are not the fit's
            warnings.simplefilter("ignore")
            loss["held"] = _log_loss(fit(held(model, side), train), test)
    except (DataError, NumericalError) as err:  # a held scale that fails numerically is not chosen
        return model, {"choice": "prior", "held_side": "items" if side == "v" else "users",
                       "skipped": f"the held scale's fit failed: {str(err).splitlines()[0][:200]}"}
    d = loss["held"] - loss["prior"]
    se = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else float("inf")
    choice = "held" if d.mean() < -MARGIN_SE * se else "prior"
    record = {"choice": choice, "held_side": "items" if side == "v" else "users",
              "held_out_log_loss": {k: float(v.mean()) for k, v in loss.items()}, "difference_se": se,
              "held_out_labels": int(d.size)}
    return (held(model, side) if choice == "held" else model), record
