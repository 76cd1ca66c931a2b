"""Simulated best-of-k (and best–worst) choices from known utilities (:mod:`crowdzoo.gp.choice`)."""
from __future__ import annotations

import numpy as np

from .choices import ChoiceData
from .simulate import _gp_draws, simulate_crowd


def simulate_choices(n_items: int = 20, n_rows: int = 300, k: int = 4, n_features: int = 2,
                     link: str = "probit", worst: bool = False, s: float = 1.0, f=None, seed: int = 0):
    """Draw choices: x ~ U[0, 10]^D, f ~ GP(0, k/s) (Matérn 3/2, median heuristic; or the given
    ``f`` (N,)), each row a set of ``k`` distinct items drawn uniformly, every member's noisy utility
    f_j + ε_j with ε_j ~ N(0, ½) (``link="probit"``) or Gumbel (``"logit"``); the best is the largest
    and, with ``worst``, the worst is the largest −f_j + ε'_j among the rest, with fresh noise: the
    sequential best–worst model of :mod:`crowdzoo.gp.choice` exactly. ``n_features=0``: items without
    features.

    Returns ``(data, f_true)``, f_true (N,) float64 numpy."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 10.0, size=(n_items, max(n_features, 1)))
    if f is None:
        f = _gp_draws(rng, X, 1, s, "matern32")[0]
    f = np.asarray(f, dtype=np.float64)
    sets = np.argsort(rng.uniform(size=(n_rows, n_items)), axis=1)[:, :k]  # k distinct items a row

    def noise(rng, shape):
        return rng.standard_normal(shape) * np.sqrt(0.5) if link == "probit" else rng.gumbel(size=shape)

    rows = np.arange(n_rows)
    first = (f[sets] + noise(rng, (n_rows, k))).argmax(1)
    best = sets[rows, first]
    bad = None
    if worst:
        second = -f[sets] + noise(rng, (n_rows, k))
        second[rows, first] = -np.inf
        bad = sets[rows, second.argmax(1)]
    features = X if n_features > 0 else np.zeros((n_items, 0))
    return ChoiceData.from_arrays(sets, best, features, worst=bad), f


def simulate_crowd_choices(n_items: int = 15, n_users: int = 6, n_rows: int = 700, k: int = 4,
                           n_components: int = 2, s_t: float = 2.0, seed: int = 5, rows_seed: int = 1):
    """Best-of-k choices by a crowd with personal tastes: crowdGPPL's own simulation of the utilities F
    (items × users; :func:`~crowdzoo.data.simulate_crowd` with ``n_components`` components of taste and
    no user features, seed ``seed``), then, from ``rows_seed``, each row a set of ``k`` distinct items
    and a user drawn uniformly, the best the largest of that user's F + ε, ε ~ N(0, ½) (the probit
    choice of :mod:`crowdzoo.gp.choice`).

    Returns ``(data, F)``, F (N, U) float64 numpy."""
    pairs, truth = simulate_crowd(n_items=n_items, n_users=n_users, n_pairs=10, n_components=n_components,
                                  n_user_features=0, s_t=s_t, seed=seed)
    F = truth["F"]
    rng = np.random.default_rng(rows_seed)
    sets = np.argsort(rng.uniform(size=(n_rows, n_items)), axis=1)[:, :k]
    users = rng.integers(0, n_users, n_rows)
    noisy = F[sets, users[:, None]] + rng.normal(0.0, np.sqrt(0.5), sets.shape)
    data = ChoiceData.from_arrays(sets, sets[np.arange(n_rows), noisy.argmax(1)], pairs.item_features,
                                  users=users)
    return data, F
