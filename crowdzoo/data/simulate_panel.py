"""Crowds made the way users hold their data, from a truth that is *not* any model of the zoo.

:func:`simulate_panel` draws a tasting panel, a survey or a product crowd as data frames: items with
features in their own units (metres, euros, grams), categorical columns to one-hot encode, or no
features at all; users with string names and a yes/no column; labels written winner-first with a
tie column; and every label's true probability, so that a held-out set has its oracle log loss.

The truth is a sum of smooth ridge functions of the standardised features (random directions through
tanh and sin), category effects and an item-level residual that no feature explains; tastes are
shared, low-rank (R random ridge functions weighted per user) or in communities (one ridge function
per community). None of it is a GP draw, so a model of the zoo does not get the truth's prior for
free. Labels: y = 1 with probability Φ(F[a, u] − F[b, u]) (the zoo's probit), scaled by ``scale``;
a pair with |F[a, u] − F[b, u]| below ``tie_width`` is called a tie with probability ``tie_rate`` /
the share of such pairs (so that about ``tie_rate`` of the labels are ties).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import ndtr

NAMES = ("alice", "bob", "carla", "dan", "eve", "femi", "gus", "hana", "ivan", "jo", "kai", "lena", "mo",
         "nina", "omar", "pia", "quin", "rosa", "sam", "tara", "uma", "vik", "wen", "xia", "yusuf", "zoe")
RAW = (("altitude_m", 800.0, 2400.0), ("price_eur", 4.0, 40.0), ("weight_g", 100.0, 1000.0),
       ("age_days", 1.0, 400.0), ("rating_pct", 40.0, 100.0), ("length_cm", 5.0, 60.0))
CATEGORIES = (("origin", ("ethiopia", "kenya", "colombia", "brazil", "sumatra")),
              ("roast", ("light", "medium", "dark")))

#: a survey's categorical respondent columns, by number of levels (2, 3, 4, 5, 2, ...)
COVARIATES = (("gender", ("female", "male")), ("age_band", ("18-34", "35-54", "55+")),
              ("region", ("north", "south", "east", "west")),
              ("education", ("none", "school", "college", "degree", "postgrad")),
              ("urban", ("no", "yes")), ("income", ("low", "middle", "high")))


@dataclass(frozen=True)
class Panel:
    """How a simulated crowd is made (:func:`simulate_panel`).

    ``features``: "raw" (numeric columns in their own units), "one-hot" (two categorical columns and
    one numeric), "none" (items are ids only) or "irrelevant" (``n_features`` numeric columns of which
    only the first half matter). ``taste``: "shared", "low-rank" (``rank`` ridge functions weighted
    per user) or "communities" (``rank`` communities). ``personal``: the sd of the personal part
    relative to the shared one. ``residual``: the sd of an item-level part no feature explains,
    relative to the feature part. ``scale``: multiplies every utility (larger: more decided labels).
    ``rankings``: each user labels by a fixed ranking of the items (y = 1 exactly when F[a, u] > F[b, u],
    as pairs taken from full rankings are, the Sushi data's kind; the oracle's log loss is then 0).
    ``labels_per_user``: the mean; each user gets between 0.75 and 1.25 times it (at least 3).
    ``user_features``: a numeric column that carries the user's community or weights (with a yes/no
    column beside it).
    ``all_pairs``: every user answers every pair of items once, in random order and orientation (a
    survey's design; ``labels_per_user`` is then N(N − 1)/2).
    ``covariates``: that many categorical user columns (2–5 levels each, string values, as a survey tool
    exports them), with many users sharing one vector of them. ``covariate_taste``: the sd of a taste
    part the covariates decide (each level of each covariate adds its own ridge function), relative to
    the shared one; 0: the covariates carry no taste."""

    n_items: int = 40
    n_users: int = 24
    labels_per_user: int = 30
    features: str = "raw"
    n_features: int = 3
    taste: str = "communities"
    rank: int = 3
    personal: float = 0.7
    residual: float = 0.3
    scale: float = 1.5
    tie_rate: float = 0.0
    rankings: bool = False
    user_features: bool = False
    all_pairs: bool = False
    covariates: int = 0
    covariate_taste: float = 0.0
    test_fraction: float = 0.2


def _standardise(X):
    sd = X.std(0)
    return (X - X.mean(0)) / np.where(sd > 0, sd, 1.0)


def _ridge(rng, Z, n: int):
    """n smooth functions of the standardised features Z (N, D): a tanh and a sine ridge each, along
    random directions, each with unit sd over the items; (n, N)."""
    if Z.shape[1] == 0:
        return rng.standard_normal((n, Z.shape[0]))
    out = []
    for _ in range(n):
        d1, d2 = rng.standard_normal((2, Z.shape[1]))
        g = np.tanh(Z @ d1 / np.sqrt(Z.shape[1])) + 0.5 * np.sin(1.3 * Z @ d2 / np.sqrt(Z.shape[1]))
        g = g - g.mean()
        out.append(g / max(g.std(), 1e-12))
    return np.stack(out)


def _items(rng, p: Panel):
    """The items table (string ids, features in their units) and the standardised inputs of the truth."""
    N = p.n_items
    ids = [f"item-{i:03d}" for i in range(N)]
    cols: dict = {}
    if p.features == "raw":
        for name, lo, hi in RAW[: p.n_features]:
            cols[name] = np.round(rng.uniform(lo, hi, N), 2)
        Z = _standardise(np.column_stack(list(cols.values())))
    elif p.features == "one-hot":
        onehots = []
        for name, levels in CATEGORIES:
            k = rng.integers(0, len(levels), N)
            cols[name] = np.asarray(levels)[k]
            onehots.append(np.eye(len(levels))[k])
        name, lo, hi = RAW[0]
        cols[name] = np.round(rng.uniform(lo, hi, N), 0)
        Z = np.column_stack(onehots + [_standardise(cols[name][:, None])])
    elif p.features == "irrelevant":
        for d in range(p.n_features):
            name, lo, hi = RAW[d % len(RAW)]
            cols[f"{name}_{d}" if d >= len(RAW) else name] = np.round(rng.uniform(lo, hi, N), 2)
        X = _standardise(np.column_stack(list(cols.values())))
        Z = X[:, : max(1, p.n_features // 2)]
    elif p.features == "none":
        Z = np.zeros((N, 0))
    else:
        raise ValueError(f"features: expected 'raw', 'one-hot', 'none' or 'irrelevant', got {p.features!r}")
    items = pd.DataFrame(cols, index=pd.Index(ids, name="id"))
    return items, Z


def _utilities(rng, p: Panel, Z):
    """True utilities F (N, U) before ``scale``, the users' community / weights, a user feature."""
    N, U = p.n_items, p.n_users
    shared = (_ridge(rng, Z, 1)[0] + p.residual * rng.standard_normal(N)) / np.sqrt(1 + p.residual**2)
    if p.taste == "shared":
        personal = np.zeros((N, U))
        user_x = rng.uniform(0, 1, U)
    elif p.taste == "low-rank":
        V = _ridge(rng, Z, p.rank)  # (R, N)
        W = rng.standard_normal((p.rank, U)) / np.sqrt(p.rank)
        personal = V.T @ W
        user_x = W[0] + 0.3 * rng.standard_normal(U)
    elif p.taste == "communities":
        G = _ridge(rng, Z, p.rank)  # one taste per community
        k = rng.integers(0, p.rank, U)
        personal = G[k].T
        user_x = k + 0.3 * rng.standard_normal(U)
    else:
        raise ValueError(f"taste: expected 'shared', 'low-rank' or 'communities', got {p.taste!r}")
    F = shared[:, None] + p.personal * personal + 0.15 * rng.standard_normal((N, U))
    levels = None
    if p.covariates:
        levels = [rng.integers(0, 2 + k % 4, U) for k in range(p.covariates)]
        if p.covariate_taste > 0:
            part = sum(_ridge(rng, Z, int(lv.max()) + 1)[lv].T for lv in levels) / np.sqrt(p.covariates)
            F = F + p.covariate_taste * part
    return p.scale * F, user_x, levels


def simulate_panel(panel: Panel | None = None, seed: int = 0, **kw):
    """A crowd as a user would hold it (module docstring). ``panel`` a :class:`Panel` (or its fields as
    keywords).

    Returns ``(train, test, items, users, truth)``: ``train``, ``test`` frames with columns
    ``taster`` (string names), ``winner``, ``loser`` (item ids), ``tie`` ("yes"/"no") and
    ``p_winner`` (the true probability that the winner wins; ½ where the pair was a tie); ``items``
    indexed by item id (features in their units, or no columns); ``users`` indexed by name with
    ``barista`` ("yes"/"no") and, with ``user_features``, a numeric ``taste_score``; ``truth`` =
    {"F": (N, U) utilities, "oracle": the held-out decided labels' log loss under the truth}. The
    split holds out ``test_fraction`` of each user's labels (at least one)."""
    p = panel if panel is not None else Panel(**kw)
    if panel is not None and kw:
        from dataclasses import replace

        p = replace(panel, **kw)
    rng = np.random.default_rng(seed)
    items, Z = _items(rng, p)
    F, user_x, levels = _utilities(rng, p, Z)
    U, N = p.n_users, p.n_items
    names = [NAMES[u % len(NAMES)] + (str(u // len(NAMES)) if u >= len(NAMES) else "") for u in range(U)]
    if p.all_pairs:
        ia, ib = np.triu_indices(N, 1)
        n_per = np.full(U, ia.size)
        u = np.repeat(np.arange(U), ia.size)
        order = np.argsort(rng.uniform(size=(U, ia.size)), axis=1).ravel() + ia.size * u
        flip = rng.uniform(size=u.size) < 0.5
        a = np.where(flip, ib[order % ia.size], ia[order % ia.size])
        b = np.where(flip, ia[order % ia.size], ib[order % ia.size])
    else:
        lo, hi = max(3, int(round(0.75 * p.labels_per_user))), max(3, int(round(1.25 * p.labels_per_user)))
        n_per = rng.integers(lo, hi + 1, U) if hi > lo else np.full(U, lo)
        u = np.repeat(np.arange(U), n_per)
        a = rng.integers(0, N, u.size)
        b = (a + rng.integers(1, N, u.size)) % N
    d = F[a, u] - F[b, u]
    prob = (d > 0).astype(float) if p.rankings else ndtr(d)
    y = rng.uniform(size=u.size) < prob
    tie = np.zeros(u.size, dtype=bool)
    if p.tie_rate > 0:
        width = np.quantile(np.abs(d), min(0.9, 2 * p.tie_rate))
        near = np.abs(d) < width
        tie = near & (rng.uniform(size=u.size) < p.tie_rate / max(near.mean(), 1e-12))
    ids = items.index.to_numpy()
    frame = pd.DataFrame({"taster": np.asarray(names)[u], "winner": np.where(y, ids[a], ids[b]),
                          "loser": np.where(y, ids[b], ids[a]), "tie": np.where(tie, "yes", "no"),
                          "p_winner": np.where(tie, 0.5, np.where(y, prob, 1 - prob))})
    test = np.zeros(u.size, dtype=bool)
    start = np.r_[0, np.cumsum(n_per)[:-1]]
    for s, n in zip(start, n_per, strict=True):  # per user: a share of its labels held out
        k = max(1, int(round(p.test_fraction * n)))
        test[s + rng.choice(n, k, replace=False)] = True
    users = pd.DataFrame({"barista": np.where(rng.uniform(size=U) < 0.3, "yes", "no")},
                         index=pd.Index(names, name="taster"))
    if p.user_features:
        users["taste_score"] = np.round(user_x, 3)
    for k, lv in enumerate(levels or ()):
        name, words = COVARIATES[k % len(COVARIATES)]
        users[name if k < len(COVARIATES) else f"{name}_{k}"] = np.asarray(words)[lv % len(words)]
    held = frame[test & ~tie]
    oracle = float(-np.log(held["p_winner"].clip(lower=1e-300)).mean())
    train = frame[~test].reset_index(drop=True)
    return train, frame[test].reset_index(drop=True), items, users, {"F": F, "oracle": oracle}
