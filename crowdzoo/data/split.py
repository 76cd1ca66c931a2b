"""Train/test splits by pairs and by users (seeded)."""
from __future__ import annotations

import numpy as np

from ..errors import DataError
from .pairwise import PairwiseData


def split_pairs(data: PairwiseData, test_fraction: float = 0.2, seed: int = 0):
    """Random split of the labels: (train, test), both keeping the full item/user tables. The labels
    of one source row (a tie read with ``ties="half"`` is two labels, ``data.source_rows``) go to the
    same side, so that no tie is half trained on and half held out; ``test_fraction`` is then a share
    of the rows. Without ties (or without source rows) each label is its own row."""
    if not 0.0 < test_fraction < 1.0:
        raise DataError(f"test_fraction: must be in (0, 1), got {test_fraction}", arg="test_fraction")
    rows = np.arange(data.n_pairs) if data.source_rows is None else data.source_rows
    start = np.r_[True, rows[1:] != rows[:-1]]  # a row's labels are consecutive
    group = np.cumsum(start) - 1  # the row of each label, numbered 0..R-1
    n_rows = int(group[-1]) + 1
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n_rows)
    n_test = max(1, int(round(test_fraction * n_rows)))
    if n_test >= n_rows:
        raise DataError(f"test_fraction: {test_fraction} leaves no training pairs out of {n_rows}",
                        arg="test_fraction")
    held = np.zeros(n_rows, dtype=bool)
    held[perm[:n_test]] = True
    return data.subset(~held[group]), data.subset(held[group])


def split_users(data: PairwiseData, test_fraction: float = 0.2, seed: int = 0):
    """Hold out whole users: (train, test), test holding every label of the held-out users."""
    if data.users is None:
        raise DataError("split_users: data has no users column", arg="data", problem="no user per label")
    if not 0.0 < test_fraction < 1.0:
        raise DataError(f"test_fraction: must be in (0, 1), got {test_fraction}", arg="test_fraction")
    present = np.unique(data.users)
    if present.size < 2:
        raise DataError("split_users: need at least two users with labels", arg="data",
                        problem="need at least two users with labels")
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
        raise DataError("split_each_user: data has no users column", arg="data", problem="no user per label")
    sizes = list(sizes)
    if any(s is not None and s < 0 for s in sizes) or any(s is None for s in sizes[:-1]):
        raise DataError(f"sizes: non-negative counts (only the last may be None), got {sizes}", arg="sizes")
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.random(data.n_pairs), data.users))  # by user, random within user
    u = data.users[order]
    start = np.r_[0, np.flatnonzero(np.diff(u)) + 1]
    rank = np.arange(order.size) - np.repeat(start, np.diff(np.r_[start, order.size]))
    edges = np.cumsum([0] + [np.inf if s is None else s for s in sizes])
    return [np.sort(order[(rank >= lo) & (rank < hi)]) for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
