"""Turning the caller's item and user ids into row positions, with errors that name the row."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ..data.pairwise import _show
from ..errors import DataError


def positions(name: str, ids, table=None, n: int | None = None, what: str = "item",
              hint: bool = True) -> torch.Tensor:
    """Positions (long tensor) of ``ids``: looked up among the training ids ``table``, or, when
    ``table`` is None, taken as row indices in [0, n) of features the caller passed."""
    ids = np.asarray(ids).reshape(-1)
    if table is not None:
        pos = pd.Index(table).get_indexer(ids)
        bad = np.flatnonzero(pos < 0)
        if bad.size:
            r = bad[0]
            more = f" (pass {what}_features= to predict for new {what}s)" if hint else ""
            raise DataError(f"{name}: row {r}: {what} id {_show(ids[r])} is not a training {what}{more}")
    else:
        pos = ids.astype(np.int64)
        bad = np.flatnonzero((pos < 0) | (pos >= n))
        if bad.size:
            raise DataError(f"{name}: row {bad[0]}: index {pos[bad[0]]} out of range [0, {n})")
    return torch.as_tensor(pos, dtype=torch.long)


def check_features(name: str, X, D: int) -> torch.Tensor:
    """New feature rows (n, D) as a float64 tensor (a copy), or a DataError naming the row and column."""
    X = np.array(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != D:
        raise DataError(f"{name}: expected shape (n, {D}), got {X.shape}")
    if not np.isfinite(X).all():
        r, col = np.argwhere(~np.isfinite(X))[0]
        raise DataError(f"{name}: row {r}, column {col}: value is not finite")
    return torch.as_tensor(X, dtype=torch.float64)


def distinct_pairs(ia: torch.Tensor, ib: torch.Tensor, ids_a) -> None:
    """Refuse pairs of unequal length and pairs of an item with itself (P = ½ by definition: a
    silent 0.5 would hide a mistake in the caller's ids), naming the row and the id."""
    if ia.shape != ib.shape:
        raise DataError(f"a, b: mismatched lengths {ia.shape[0]} and {ib.shape[0]}")
    same = torch.nonzero(ia == ib).reshape(-1)
    if same.numel():
        r = int(same[0])
        raise DataError(f"a, b: row {r}: both are item {_show(np.asarray(ids_a).reshape(-1)[r])} (an item "
                        f"compared with itself; {same.numel()} such row(s)); drop those rows")


def feature_rows(name: str, item_features, D: int):
    """New items to predict for: (features (n, D) tensor, their ids or None). A DataFrame is read
    by its index (``a``, ``b`` are then its ids); an array by position (``a``, ``b`` are row numbers)."""
    if isinstance(item_features, pd.DataFrame):
        return check_features(name, item_features.to_numpy(), D), item_features.index
    return check_features(name, item_features, D), None
