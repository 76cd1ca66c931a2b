"""Train/test splits by pairs and by users (seeded)."""
from __future__ import annotations

import numpy as np

from ..errors import DataError
from .pairwise import PairwiseData


def split_pairs(data: PairwiseData, test_fraction: float = 0.2, seed: int = 0):
    """Random split of the labels: (train, test), both keeping the full item/user tables."""
    if not 0.0 < test_fraction < 1.0:
        raise DataError(f"test_fraction: must be in (0, 1), got {test_fraction}")
    rng = np.random.default_rng(seed)
    perm = rng.permutation(data.n_pairs)
    n_test = max(1, int(round(test_fraction * data.n_pairs)))
    if n_test >= data.n_pairs:
        raise DataError(f"test_fraction: {test_fraction} leaves no training pairs out of {data.n_pairs}")
    return data.subset(np.sort(perm[n_test:])), data.subset(np.sort(perm[:n_test]))


def split_users(data: PairwiseData, test_fraction: float = 0.2, seed: int = 0):
    """Hold out whole users: (train, test), test holding every label of the held-out users."""
    if data.users is None:
        raise DataError("split_users: data has no users column")
    if not 0.0 < test_fraction < 1.0:
        raise DataError(f"test_fraction: must be in (0, 1), got {test_fraction}")
    present = np.unique(data.users)
    if present.size < 2:
        raise DataError("split_users: need at least two users with labels")
    rng = np.random.default_rng(seed)
    n_test = min(present.size - 1, max(1, int(round(test_fraction * present.size))))
    test_users = rng.choice(present, size=n_test, replace=False)
    mask = np.isin(data.users, test_users)
    return data.subset(~mask), data.subset(mask)


def split_each_user(data: PairwiseData, sizes, seed: int = 0) -> list[np.ndarray]:
    """Split every user's labels at random into consecutive parts of ``sizes`` labels each (e.g.
    (30, 15) for train/test, (5, 35, 5) for train/pool/test, as Houlsby et al. 2012 §4); the last
    size may be None for "the rest". Returns one sorted row-index array per part; a user with
    fewer labels fills the parts in order."""
    if data.users is None:
        raise DataError("split_each_user: data has no users column")
    sizes = list(sizes)
    if any(s is not None and s < 0 for s in sizes) or any(s is None for s in sizes[:-1]):
        raise DataError(f"sizes: non-negative counts (only the last may be None), got {sizes}")
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.random(data.n_pairs), data.users))  # by user, random within user
    u = data.users[order]
    start = np.r_[0, np.flatnonzero(np.diff(u)) + 1]
    rank = np.arange(order.size) - np.repeat(start, np.diff(np.r_[start, order.size]))
    edges = np.cumsum([0] + [np.inf if s is None else s for s in sizes])
    return [np.sort(order[(rank >= lo) & (rank < hi)]) for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
