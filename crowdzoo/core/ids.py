"""Turning the caller's item and user ids into row positions, with errors that name the row."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ..errors import DataError, _show


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
            problem = f"{what} id {_show(ids[r])} is not a training {what}"
            raise DataError(f"{name}: row {r}: {problem}{more}", arg=name, row=int(r),
                            ids=list(pd.unique(ids[bad])), problem=problem)
    else:
        pos = ids.astype(np.int64)
        bad = np.flatnonzero((pos < 0) | (pos >= n))
        if bad.size:
            problem = f"index {pos[bad[0]]} out of range [0, {n})"
            raise DataError(f"{name}: row {bad[0]}: {problem}", arg=name, row=int(bad[0]), problem=problem)
    return torch.as_tensor(pos, dtype=torch.long)


NEW_USERS = ("error", "consensus", "prior")


def seen_users(users, table, n: int, new_users: str = "error", prior: str | None = None,
               consensus: str | None = None) -> tuple[np.ndarray, torch.Tensor]:
    """The pairs' user ids (one per pair; a single id is repeated) and their positions among the
    training users (−1: not seen in training). A user not seen in training is refused
    (``new_users="error"``, naming the row and every such id), or left to the caller to predict by
    the population's preference (``"consensus"``) or by the model's prior predictive for a new user
    (``"prior"``). ``prior`` /
    ``consensus``: why the model has no such prediction (None: it has one)."""
    if new_users not in NEW_USERS:
        raise DataError(f"new_users: expected one of {list(NEW_USERS)}, got {new_users!r}", arg="new_users")
    ids = np.asarray(users, dtype=object).reshape(-1)
    if ids.shape[0] == 1 and n != 1:
        ids = np.repeat(ids, n)
    if ids.shape[0] != n:
        raise DataError(f"users: expected one user per pair ({n}), got {ids.shape[0]}", arg="users")
    pos = pd.Index(table).get_indexer(ids)
    seen = pos >= 0
    if seen.all():
        return ids, torch.as_tensor(pos, dtype=torch.long)
    unseen = list(pd.unique(ids[~seen]))
    r = int(np.flatnonzero(~seen)[0])
    what = (f"user id {_show(ids[r])} is not a training user ({(~seen).sum()} row(s), {len(unseen)} "
            f"user(s) not seen: {', '.join(_show(u) for u in unseen[:5])}{', …' if len(unseen) > 5 else ''})")
    if new_users == "error":
        ways = [f"new_users={w!r} for {t}" for w, t, why in (
            ("consensus", "the population's preference", consensus),
            ("prior", "the prior predictive of a new user", prior)) if why is None]
        raise DataError(f"users: row {r}: {what}; check the ids" + (f", or pass {' or '.join(ways)}" if ways
                                                                     else ""),
                        arg="users", row=r, ids=unseen, problem=what)
    why = consensus if new_users == "consensus" else prior
    if why is not None:
        raise DataError(f"new_users={new_users!r}: {why} (users: row {r}: {what})", arg="new_users", row=r,
                        ids=unseen,
                        problem=f"the model has no {new_users} prediction for users it was not fitted on "
                                f"({what})")
    return ids, torch.as_tensor(pos, dtype=torch.long)


def by_rows(pos: torch.Tensor, known, new) -> np.ndarray:
    """Predictions assembled row by row: ``known(rows)`` for the rows whose user was seen in training
    (``pos`` ≥ 0, as :func:`seen_users` gives), ``new(rows)`` for the others (each called once, on an
    index array, only if it has rows); each returns one value per row, or a row of values (n, k)."""
    seen = (pos >= 0).numpy()
    out = None
    for mask, f in ((seen, known), (~seen, new)):
        rows = np.flatnonzero(mask)
        if rows.size:
            part = np.asarray(f(rows))
            if out is None:
                out = np.empty(seen.shape[:1] + part.shape[1:])
            out[rows] = part
    return np.empty(0) if out is None else out


def check_features(name: str, X, D: int) -> torch.Tensor:
    """New feature rows (n, D) as a float64 tensor (a copy), or a DataError naming the row and column."""
    X = np.array(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != D:
        raise DataError(f"{name}: expected shape (n, {D}), got {X.shape}", arg=name)
    if not np.isfinite(X).all():
        r, col = np.argwhere(~np.isfinite(X))[0]
        raise DataError(f"{name}: row {r}, column {col}: value is not finite", arg=name, row=int(r),
                        problem=f"column {col}: value is not finite")
    return torch.as_tensor(X, dtype=torch.float64)


def distinct_pairs(ia: torch.Tensor, ib: torch.Tensor, ids_a) -> None:
    """Refuse pairs of unequal length and pairs of an item with itself (P = ½ by definition: a
    silent 0.5 would hide a mistake in the caller's ids), naming the row and the id."""
    if ia.shape != ib.shape:
        raise DataError(f"a, b: mismatched lengths {ia.shape[0]} and {ib.shape[0]}", arg="a, b")
    same = torch.nonzero(ia == ib).reshape(-1)
    if same.numel():
        r = int(same[0])
        raise DataError(f"a, b: row {r}: both are item {_show(np.asarray(ids_a).reshape(-1)[r])} (an item "
                        f"compared with itself; {same.numel()} such row(s)); drop those rows", arg="a, b")


def feature_rows(name: str, item_features, D: int):
    """New items to predict for: (features (n, D) tensor, their ids or None). A DataFrame is read
    by its index (``a``, ``b`` are then its ids); an array by position (``a``, ``b`` are row numbers)."""
    if isinstance(item_features, pd.DataFrame):
        return check_features(name, item_features.to_numpy(), D), item_features.index
    return check_features(name, item_features, D), None


def choice_positions(sets, table) -> tuple[torch.Tensor, torch.Tensor]:
    """Sets of item ids (a list of sequences, lengths may differ, or a 2-D array) as positions among
    ``table`` (R, k_max), padding read as 0, and the mask (R, k_max) of the slots that hold an item;
    a DataError for an unknown id, a set of fewer than 2 items or an item twice in a set."""
    if isinstance(sets, np.ndarray) and sets.ndim == 2:
        rows = list(sets)
    else:
        rows = [np.asarray(s, dtype=object).reshape(-1) for s in sets]
    if not rows:
        raise DataError("sets: no sets to predict for", arg="sets")
    k = np.array([len(r) for r in rows])
    small = np.flatnonzero(k < 2)
    if small.size:
        r = int(small[0])
        raise DataError(f"sets: row {r}: a set of {k[r]} item(s); a choice needs at least 2", arg="sets",
                        row=r, problem=f"a set of {k[r]} item(s)")
    flat = positions("sets", np.concatenate(rows), table)
    items = torch.zeros(len(rows), int(k.max()), dtype=torch.long)
    mask = torch.arange(items.shape[1])[None, :] < torch.as_tensor(k)[:, None]
    items[mask] = flat
    srt = torch.sort(torch.where(mask, items, -1 - torch.arange(items.shape[1])), 1).values
    dup = torch.nonzero((srt[:, 1:] == srt[:, :-1]).any(1)).reshape(-1)
    if dup.numel():
        r = int(dup[0])
        raise DataError(f"sets: row {r}: an item appears more than once in the set", arg="sets", row=r,
                        problem="an item appears more than once in the set")
    return items, mask
