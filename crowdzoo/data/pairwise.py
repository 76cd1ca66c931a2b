"""`PairwiseData`: who said which of two items is better.

Per label: ``a``, ``b`` (item positions), ``y`` (1 if a ≻ b, 0 if b ≻ a) and optionally ``users``
(user positions); ``item_features`` (N, D) and optionally ``user_features`` (U, E). The user's
own item and user ids are kept so that results come back labelled with them.

Validation happens here, at the boundary: every error names the argument or column, the row and
the problem. Nothing is repaired silently and the caller's arrays and frames are copied, never
changed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import DataError


def _show(x) -> str:
    """repr of a value as the user wrote it (numpy scalars shown as plain Python values)."""
    return repr(x.item() if isinstance(x, np.generic) else x)


def _int_index(name: str, x, upper: int) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise DataError(f"{name}: expected a 1-D array of indices, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        as_float = pd.to_numeric(pd.Series(arr), errors="coerce").to_numpy()
        bad = np.flatnonzero(~np.isfinite(as_float) | (as_float != np.round(as_float)))
        if bad.size:
            r = bad[0]
            raise DataError(f"{name}: row {r}: {_show(arr[r])} is not an integer index")
        arr = as_float.astype(np.int64)
    arr = arr.astype(np.int64, copy=True)
    bad = np.flatnonzero((arr < 0) | (arr >= upper))
    if bad.size:
        r = bad[0]
        raise DataError(
            f"{name}: row {r}: index {arr[r]} is out of range [0, {upper}) "
            f"({bad.size} row(s) affected)"
        )
    return arr


def _features(name: str, X) -> np.ndarray:
    if isinstance(X, pd.DataFrame):
        for j, col in enumerate(X.columns):
            if not pd.api.types.is_numeric_dtype(X[col]) or pd.api.types.is_bool_dtype(X[col]):
                r = int(np.flatnonzero(pd.to_numeric(X[col], errors="coerce").isna())[:1].sum())
                raise DataError(
                    f"{name}: column {j} ({col!r}) is not numeric (row {r}: {_show(X[col].iloc[r])})"
                )
        X = X.to_numpy()
    arr = np.asarray(X)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise DataError(f"{name}: expected a 2-D array (rows × features), got shape {arr.shape}")
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.number) or arr.dtype == bool:
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            for r in range(arr.shape[0]):
                for c in range(arr.shape[1]):
                    try:
                        float(arr[r, c])
                    except (TypeError, ValueError):
                        raise DataError(
                            f"{name}: row {r}, column {c}: {_show(arr[r, c])} is not numeric"
                        ) from None
    arr = np.array(arr, dtype=np.float64, copy=True)
    bad = np.argwhere(~np.isfinite(arr))
    if bad.size:
        r, c = bad[0]
        raise DataError(f"{name}: row {r}, column {c}: value {arr[r, c]} is not finite (NaN or inf)")
    if arr.shape[0] == 0:
        raise DataError(f"{name}: no rows")
    return arr


@dataclass(frozen=True)
class PairwiseData:
    """Pairwise preference labels with item (and optional user) features.

    Attributes
    ----------
    a, b : (P,) int64 — positions of the two items of each pair in ``item_features``.
    y : (P,) float64 — 1.0 if a ≻ b, 0.0 if b ≻ a.
    item_features : (N, D) float64.
    users : (P,) int64 or None — positions in ``user_ids`` (None for single-user data).
    user_features : (U, E) float64 or None.
    item_ids, user_ids : the caller's ids, so that results come back labelled.
    """

    a: np.ndarray
    b: np.ndarray
    y: np.ndarray
    item_features: np.ndarray
    users: np.ndarray | None = None
    user_features: np.ndarray | None = None
    item_ids: np.ndarray = field(default=None)
    user_ids: np.ndarray | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(cls, a, b, y, item_features, users=None, user_features=None,
                    item_ids=None, user_ids=None) -> PairwiseData:
        """Build from index arrays. ``a``, ``b`` index rows of ``item_features`` (N, D);
        ``users`` (optional) index rows of ``user_features`` (or count users 0..U-1)."""
        X = _features("item_features", item_features)
        N = X.shape[0]
        lengths = {"a": np.size(a), "b": np.size(b), "y": np.size(y)}
        if users is not None:
            lengths["users"] = np.size(users)
        if len(set(lengths.values())) != 1:
            raise DataError(f"mismatched lengths: {lengths}; a, b, y (and users) need one row per label")
        if lengths["a"] == 0:
            raise DataError("a, b, y: empty data (no labels)")
        a = _int_index("a", a, N)
        b = _int_index("b", b, N)
        same = np.flatnonzero(a == b)
        if same.size:
            r = same[0]
            raise DataError(f"a, b: row {r}: a == b == {a[r]} (an item compared with itself)")
        y_arr = np.asarray(y)
        y_num = pd.to_numeric(pd.Series(y_arr.reshape(-1)), errors="coerce").to_numpy(np.float64)
        bad = np.flatnonzero(~np.isin(y_num, (0.0, 1.0)))
        if bad.size:
            r = bad[0]
            raise DataError(
                f"y: row {r}: label {_show(y_arr.reshape(-1)[r])} is outside {{0, 1}} "
                "(1 means a preferred to b; drop or split ties before building the data)"
            )
        U_feat = None
        u = None
        if user_features is not None:
            U_feat = _features("user_features", user_features)
        if users is not None:
            n_users = U_feat.shape[0] if U_feat is not None else int(np.max(users)) + 1
            if user_ids is not None:
                n_users = max(n_users, len(user_ids)) if U_feat is None else n_users
            u = _int_index("users", users, n_users)
            if user_ids is None:
                user_ids = np.arange(n_users)
        elif U_feat is not None:
            raise DataError("user_features given without users: pass users= (one user index per label)")
        item_ids = np.arange(N) if item_ids is None else np.asarray(item_ids).copy()
        if len(item_ids) != N:
            raise DataError(f"item_ids: {len(item_ids)} ids for {N} feature rows")
        if user_ids is not None:
            user_ids = np.asarray(user_ids).copy()
            if U_feat is not None and len(user_ids) != U_feat.shape[0]:
                raise DataError(f"user_ids: {len(user_ids)} ids for {U_feat.shape[0]} user feature rows")
        return cls(a=a, b=b, y=np.array(y_num, dtype=np.float64), item_features=X, users=u,
                   user_features=U_feat,
                   item_ids=item_ids, user_ids=user_ids)

    @classmethod
    def from_frame(cls, df: pd.DataFrame, items: pd.DataFrame, a: str = "a", b: str = "b",
                   y: str = "y", user: str | None = None, users: pd.DataFrame | None = None,
                   ties: str = "error") -> PairwiseData:
        """Build from a DataFrame of labels with named columns and a DataFrame of item features.

        ``items`` is indexed by item id (every column a numeric feature); ``df[a]``/``df[b]`` hold
        item ids. ``user`` names the user-id column; ``users`` (optional) is indexed by user id.
        ``ties``: rows with y = 0.5 raise (``"error"``) or are dropped (``"drop"``); nothing else.
        """
        if not isinstance(df, pd.DataFrame) or not isinstance(items, pd.DataFrame):
            raise DataError("from_frame: df and items must be pandas DataFrames")
        for col in [a, b, y] + ([user] if user else []):
            if col not in df.columns:
                raise DataError(f"column {col!r} not found in df (columns: {list(df.columns)})")
        if items.index.has_duplicates:
            dup = items.index[items.index.duplicated()][0]
            raise DataError(f"items: index (item id) {_show(dup)} appears more than once")
        if ties not in ("error", "drop"):
            raise DataError(f"ties: expected 'error' or 'drop', got {ties!r}")
        frame = df
        if ties == "drop":
            frame = df[pd.to_numeric(df[y], errors="coerce") != 0.5]
        if len(frame) == 0:
            raise DataError("df: empty data (no labels)")
        pos = pd.Series(np.arange(len(items)), index=items.index)

        def lookup(col, table, what):
            idx = pd.Index(table.index).get_indexer(frame[col])
            missing = np.flatnonzero(idx < 0)
            if missing.size:
                r = missing[0]
                raise DataError(
                    f"column {col!r}, row {r} (index {_show(frame.index[r])}): {what} id "
                    f"{_show(frame[col].iloc[r])} not found in {what}s table"
                )
            return idx

        ai = lookup(a, pos.to_frame(), "item")
        bi = lookup(b, pos.to_frame(), "item")
        kw = {}
        if user:
            if users is not None:
                if users.index.has_duplicates:
                    dup = users.index[users.index.duplicated()][0]
                    raise DataError(f"users: index (user id) {_show(dup)} appears more than once")
                kw["users"] = lookup(user, users, "user")
                kw["user_features"] = users
                kw["user_ids"] = users.index.to_numpy()
            else:
                codes, uniq = pd.factorize(frame[user], sort=True)
                if (codes < 0).any():
                    r = int(np.flatnonzero(codes < 0)[0])
                    raise DataError(f"column {user!r}, row {r}: missing user id")
                kw["users"] = codes
                kw["user_ids"] = np.asarray(uniq)
        try:
            return cls.from_arrays(ai, bi, frame[y].to_numpy(), items, item_ids=items.index.to_numpy(), **kw)
        except DataError as e:
            msg = str(e)
            for arg, col in (("a", a), ("b", b), ("y", y)):
                if msg.startswith(f"{arg}:") or msg.startswith(f"{arg}, "):
                    msg = msg.replace(f"{arg}:", f"column {col!r}:", 1) if msg.startswith(f"{arg}:") else msg
            raise DataError(msg) from None

    # ------------------------------------------------------------------ views
    @property
    def n_items(self) -> int:
        return self.item_features.shape[0]

    @property
    def n_pairs(self) -> int:
        return self.a.shape[0]

    @property
    def n_users(self) -> int:
        return 0 if self.user_ids is None else len(self.user_ids)

    def to_frame(self) -> pd.DataFrame:
        """One row per label with the caller's ids: columns a, b, y (and user)."""
        out = {"a": self.item_ids[self.a], "b": self.item_ids[self.b]}
        if self.users is not None:
            out = {"user": self.user_ids[self.users], **out}
        out["y"] = self.y.astype(np.int64)
        return pd.DataFrame(out)

    def items_frame(self) -> pd.DataFrame:
        """Item features indexed by item id."""
        D = self.item_features.shape[1]
        return pd.DataFrame(self.item_features, index=pd.Index(self.item_ids, name="item"),
                            columns=[f"x{d}" for d in range(D)])

    def subset(self, rows) -> PairwiseData:
        """The labels in ``rows`` (indices or boolean mask); item and user tables are kept whole."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        if rows.size == 0:
            raise DataError("subset: no rows selected")
        return PairwiseData(a=self.a[rows], b=self.b[rows], y=self.y[rows],
                            item_features=self.item_features,
                            users=None if self.users is None else self.users[rows],
                            user_features=self.user_features, item_ids=self.item_ids,
                            user_ids=self.user_ids)

    def __repr__(self) -> str:
        u = f", users={self.n_users}" if self.users is not None else ""
        return (f"PairwiseData(pairs={self.n_pairs}, items={self.n_items}, "
                f"item_dims={self.item_features.shape[1]}{u})")
