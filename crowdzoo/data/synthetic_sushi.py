"""A synthetic crowd shaped like the crowdGPPL paper's Sushi-A protocol (§5.2), for checks that the
real Sushi data (not redistributable) cannot be shipped for.

10 items with 18 Sushi-style features (style, major group, four numeric columns, a one-hot minor
group), 100 users whose utilities are a consensus plus rank-K personal variation plus per-user item
noise,

    f_u(i) = g(i) + Σ_k a_uk h_k(i) + noise · ε_ui,

a full ranking per user (the sort of f_u), and per user ``n_train`` + ``n_test`` of its 45 pairs
drawn at random, each flipped with probability ½ (balanced labels; y = 1 when a ranks above b).

The random stream is the one of ``make_synthetic_sushi.py`` in the project's shared data folder,
for which the authors' crowdGPPL numbers are recorded: the same seed gives the same files
(``tests/inference/test_natgrad_numerics.py`` checks it when that script is present).
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from ..errors import DataWarning
from .pairwise import PairwiseData


class SyntheticSushi(NamedTuple):
    """Train and test labels (user ids 0..U−1, item ids 0..9), the features, and each user's full
    ranking ``gold_order`` (U, 10), best item first."""

    train: PairwiseData
    test: PairwiseData
    gold_order: np.ndarray
    utilities: np.ndarray  # (U, N) true utilities


def _item_table(rng, n_items=10):
    style = rng.integers(0, 2, n_items).astype(float)
    major = (rng.uniform(size=n_items) < 0.3).astype(float)
    oily = np.round(rng.uniform(0.5, 4.0, n_items), 2)
    eat = np.round(rng.uniform(0.5, 3.0, n_items), 2)
    price = np.round(rng.uniform(0.8, 4.5, n_items), 2)
    sell = np.round(rng.uniform(0.1, 1.0, n_items), 2)
    groups = rng.choice(12, size=7, replace=False)  # 10 items over 12 minor groups, a few shared
    minor = np.concatenate([groups, rng.choice(groups, size=n_items - 7)])
    rng.shuffle(minor)
    onehot = np.zeros((n_items, 12))
    onehot[np.arange(n_items), minor] = 1.0
    return np.column_stack([style, major, oily, eat, price, sell, onehot])


def _smooth_function(rng, X):
    """A random function of the standardised features: linear part + item-specific part."""
    Z = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    beta = rng.normal(size=X.shape[1]) / np.sqrt(X.shape[1])
    f = Z @ beta + 0.5 * rng.normal(size=X.shape[0])
    return (f - f.mean()) / f.std()


def synthetic_sushi(seed: int = 0, n_train: int = 5, n_test: int = 25, n_users: int = 100, rank: int = 5,
                    personal: float = 1.25, consensus: float = 1.0, noise: float = 1.5) -> SyntheticSushi:
    """The synthetic Sushi-A crowd (module docstring): 5 training pairs per user is Sushi-A-small's
    protocol, 20 is Sushi-A's; 25 test pairs each."""
    rng = np.random.default_rng(seed)
    X = _item_table(rng)
    N = X.shape[0]
    g = consensus * _smooth_function(rng, X)
    H = np.stack([_smooth_function(rng, X) for _ in range(rank)])  # (K, N)
    A = rng.normal(size=(n_users, rank)) * personal / np.sqrt(rank)
    F = g[None, :] + A @ H + noise * rng.normal(size=(n_users, N))
    order = np.argsort(-F, axis=1)  # best first
    hi, lo = np.triu_indices(N, k=1)  # positions in the ranking: hi above lo, in the script's order
    rows = {"train": [], "test": []}
    for u in range(n_users):  # one draw per user from the shared stream, as the script does
        pick = rng.choice(hi.size, size=n_train + n_test, replace=False)
        flip = rng.uniform(size=n_train + n_test) < 0.5
        a, b = order[u, hi[pick]], order[u, lo[pick]]
        a, b = np.where(flip, b, a), np.where(flip, a, b)
        labels = np.column_stack([np.full(pick.size, u), a, b, (~flip).astype(int)])
        rows["train"].append(labels[:n_train])
        rows["test"].append(labels[n_train:])
    out = {}
    for part, rr in rows.items():
        u, a, b, y = np.concatenate(rr).T
        with warnings.catch_warnings():  # the generator's constant feature columns are by design
            warnings.simplefilter("ignore", DataWarning)
            out[part] = PairwiseData.from_arrays(a, b, y.astype(float), X, users=u,
                                                 item_ids=np.arange(N), user_ids=np.arange(n_users))
    return SyntheticSushi(out["train"], out["test"], order, F)
