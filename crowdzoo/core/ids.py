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
    """New feature rows (n, D) as a float64 tensor, or a DataError naming the row and column."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != D:
        raise DataError(f"{name}: expected shape (n, {D}), got {X.shape}")
    if not np.isfinite(X).all():
        r, col = np.argwhere(~np.isfinite(X))[0]
        raise DataError(f"{name}: row {r}, column {col}: value is not finite")
    return torch.as_tensor(X, dtype=torch.float64)
