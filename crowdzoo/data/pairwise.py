"""`PairwiseData`: who said which of two items is better.

Per label: ``a``, ``b`` (item positions), ``y`` (1 if a ≻ b, 0 if b ≻ a, and ½ for a tie where ties
are modelled, ``ties="model"``: :mod:`crowdzoo.gp.ordinal`) and optionally ``users``
(user positions) and ``weights`` (each label's weight: a label of weight w counts as w copies of it in
every route's likelihood; None, every label 1); ``item_features`` (N, D) and optionally
``user_features`` (U, E). The user's own item and user ids are kept so that results come back
labelled with them. :meth:`PairwiseData.from_counts` reads counts per pair (wins, losses, ties) as
weighted labels.

Validation happens here, at the boundary: every error names the argument or column, the row and
the problem. Nothing is repaired silently and the caller's arrays and frames are copied, never
changed.
"""
from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataError, DataWarning, _show
from .shard import read_shard


def _int_index(name: str, x, upper: int) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise DataError(f"{name}: expected a 1-D array of indices, got shape {arr.shape}", arg=name)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        as_float = pd.to_numeric(pd.Series(arr), errors="coerce").to_numpy()
        bad = np.flatnonzero(~np.isfinite(as_float) | (as_float != np.round(as_float)))
        if bad.size:
            r = bad[0]
            raise DataError(f"{name}: row {r}: {_show(arr[r])} is not an integer index", arg=name, row=int(r),
                            problem=f"{_show(arr[r])} is not an integer index")
        arr = as_float.astype(np.int64)
    arr = arr.astype(np.int64, copy=True)
    bad = np.flatnonzero((arr < 0) | (arr >= upper))
    if bad.size:
        r = bad[0]
        problem = f"index {arr[r]} is out of range [0, {upper}) ({bad.size} row(s) affected)"
        raise DataError(f"{name}: row {r}: {problem}", arg=name, row=int(r), problem=problem)
    return arr


def _features(name: str, X, ids=None, what: str = "item") -> np.ndarray:
    """``X`` (rows × features; an array or a DataFrame of numeric columns, possibly with no columns)
    as float64. Errors name a row by the caller's id (``what`` and ``ids``, when given) and a column
    by its name (when ``X`` is a DataFrame); otherwise by position."""
    cols = None

    def row(r):
        return f"{what} {_show(ids[r])}" if ids is not None else f"row {r}"

    def column(c):
        return repr(cols[c]) if cols is not None else str(c)

    def named(r):  # the row's id, for a message whose row is given apart
        return f"{what} {_show(ids[r])}, " if ids is not None else ""

    if isinstance(X, pd.DataFrame):
        cols = list(X.columns)
        if X.columns.has_duplicates:
            dup = X.columns[X.columns.duplicated()][0]
            raise DataError(f"{name}: column name {_show(dup)} appears more than once", arg=name)
        for j, col in enumerate(X.columns):
            if not pd.api.types.is_numeric_dtype(X[col]) or pd.api.types.is_bool_dtype(X[col]):
                r = int(np.flatnonzero(pd.to_numeric(X[col], errors="coerce").isna())[:1].sum())
                label = f"column {j} ({col!r})" if ids is None else f"column {col!r}"
                problem = f"{label} is not numeric ({row(r)}: {_show(X[col].iloc[r])})"
                raise DataError(
                    f"{name}: {problem}; keep the numeric columns (frame[[...]]) or one-hot encode this one "
                    "(pd.get_dummies(frame, dtype=float))", arg=name, row=r, problem=problem)
        X = X.to_numpy(dtype=np.float64, na_value=np.nan)
    arr = np.asarray(X)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise DataError(f"{name}: expected a 2-D array (rows × features), got shape {arr.shape}", arg=name)
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
                            f"{name}: {row(r)}, column {column(c)}: {_show(arr[r, c])} is not numeric",
                            arg=name, row=r, problem=f"{named(r)}column {column(c)}: {_show(arr[r, c])} is "
                                                     "not numeric") from None
    arr = np.array(arr, dtype=np.float64, copy=True)
    bad = np.argwhere(~np.isfinite(arr))
    if bad.size:
        r, c = bad[0]
        more = f" ({len(bad)} values in all)" if len(bad) > 1 else ""
        problem = f"{named(r)}column {column(c)}: value {arr[r, c]} is not finite (NaN or inf){more}"
        raise DataError(f"{name}: {row(r)}, column {column(c)}: value {arr[r, c]} is not finite (NaN or inf)"
                        f"{more}", arg=name, row=int(r), problem=problem)
    if arr.shape[0] == 0:
        raise DataError(f"{name}: no rows", arg=name)
    return arr


def _warn(message: str, arg: str) -> None:
    """A :class:`DataWarning` about the argument ``arg`` (which ``message`` begins with), attributed to
    the caller's first line outside crowdzoo."""
    package = str(Path(__file__).resolve().parents[1]) + os.sep
    level, frame = 2, sys._getframe(1)
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(DataWarning(message, arg=arg), stacklevel=level)


def _few(names, k: int = 5) -> str:
    names = list(names)
    return ", ".join(names[:k]) + (f" and {len(names) - k} more" if len(names) > k else "")


def _feature_warnings(name: str, X: np.ndarray, cols, ids, what: str, rows_too: bool) -> None:
    """Warn (:class:`DataWarning`) about feature columns that carry no information (constant),
    columns that repeat another one, and (``rows_too``) rows that share one feature vector."""
    n, d = X.shape
    if n < 2 or d == 0:
        return
    label = [repr(c) for c in cols] if cols is not None else [str(j) for j in range(d)]
    const = np.flatnonzero(np.ptp(X, axis=0) == 0)
    if const.size:
        _warn(f"{name}: column{'s' if const.size > 1 else ''} {_few(label[j] for j in const)} "
              f"{'are' if const.size > 1 else 'is'} constant (the same for every {what}): "
              + (f"they cannot tell {what}s apart; drop them" if const.size > 1
                 else f"it cannot tell {what}s apart; drop it")
              + (f". With no informative column left, every {what} looks the same to a GP over the features"
                 if const.size == d else ""), name)
    X = X + 0.0  # -0.0 and 0.0 are one value
    columns = np.ascontiguousarray(X.T)
    first, dups = {}, []
    for j in np.setdiff1d(np.arange(d), const):
        key = columns[j].tobytes()
        if key in first:
            dups.append(f"{label[j]} = {label[first[key]]}")
        else:
            first[key] = j
    if dups:
        _warn(f"{name}: duplicated column{'s' if len(dups) > 1 else ''} {_few(dups)} (the same value for "
              f"every {what}): each repeat counts the same feature again in the kernel's distances; drop the "
              "repeats", name)
    if rows_too:
        inverse, _ = pd.factorize(pd.Series([row.tobytes() for row in np.ascontiguousarray(X)]))
        shared = np.flatnonzero(np.bincount(inverse)[inverse] > 1)
        if shared.size:
            groups = {}
            for r in shared:
                groups.setdefault(inverse[r], []).append(_show(ids[r]))
            examples = _few((" = ".join(g[:3]) + (" = …" if len(g) > 3 else "") for g in groups.values()), 3)
            _warn(f"{name}: {shared.size} {what}s share their feature vector with another {what} "
                  f"({len(groups)} group(s), e.g. {examples}): a GP over the features forces the utilities "
                  f"of {what}s with identical features to be equal. Add a feature that tells them apart, or "
                  "give the model independent utilities (an items frame with no feature columns, or "
                  "BradleyTerry)", name)


#: what ``from_frame`` does with ties: refuse them, leave them out, two half labels, or a third outcome
TIES = ("error", "drop", "half", "model")

FLAG_WORDS = {"true": 1.0, "false": 0.0, "yes": 1.0, "no": 0.0}  # a yes/no column's words, any case


def flag_numbers(s: pd.Series) -> pd.Series:
    """A yes/no column's true/false/yes/no strings (any case, spaces around ignored) as 1.0 / 0.0;
    other values unchanged."""
    return s.map(lambda v: FLAG_WORDS.get(v.strip().lower(), v) if isinstance(v, str) else v)


def _flags(col: str, s: pd.Series, where, arg: str = "tie") -> np.ndarray:
    """A tie column as booleans: bool, 0/1, or the strings true/false/yes/no (any case); ``arg``: the
    argument that names the column, for the error."""
    if pd.api.types.is_bool_dtype(s):
        return s.to_numpy(dtype=bool)
    vals = flag_numbers(s)
    num = pd.to_numeric(vals, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = np.flatnonzero(~np.isin(num, (0.0, 1.0)))
    if bad.size:
        r = bad[0]
        problem = (f"{_show(s.iloc[r])} is not a tie flag (1, true or yes for a tie; 0, false or no "
                   f"otherwise; {bad.size} row(s) affected)")
        raise DataError(f"column {col!r}, {where(r)}: {_show(s.iloc[r])} is not a tie flag (use 1/True for a "
                        f"tie and 0/False otherwise; {bad.size} row(s) affected)", arg=arg, row=int(r),
                        problem=problem)
    return num == 1.0


def _amounts(col: str, s: pd.Series, where, arg: str, whole: bool) -> np.ndarray:
    """A column of weights (``whole=False``: finite numbers > 0) or of counts (``whole=True``: whole
    numbers ≥ 0) as float64; a blank, non-numeric, negative (or, for a weight, zero) or, for a count,
    fractional value is refused, naming ``col``, the row (``where(r)``) and the value; ``arg``: the
    argument that names the column."""
    raw = s.to_numpy()
    num = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    if pd.api.types.is_bool_dtype(s):
        num = np.full(len(s), np.nan)
    bad = ~np.isfinite(num) | ((num < 0) if whole else (num <= 0))
    if whole:
        bad |= np.isfinite(num) & (num != np.round(num))
    rows = np.flatnonzero(bad)
    if rows.size:
        r = int(rows[0])
        v = raw[r]
        name, detail = (("count", "a whole number ≥ 0: how many times the row's outcome was given") if whole
                        else ("weight", "a number > 0: how many labels the row counts as"))
        problem = f"missing {name} ({detail})" if pd.isna(v) else f"{_show(v)} is not a {name} ({detail})"
        problem += f"; {rows.size} row(s) affected" if rows.size > 1 else ""
        raise DataError(f"column {col!r}, {where(r)}: {problem}", arg=arg, row=r, problem=problem)
    return num


def _check_columns(df: pd.DataFrame, named: dict) -> None:
    """Each column of ``named`` ({argument: column name or None}) is in ``df``, once."""
    for arg, col in named.items():
        if col is None:
            continue
        if col not in df.columns:
            raise DataError(f"{arg}: column {col!r} not found in df (columns: {list(df.columns)})",
                            arg=arg, problem=f"column {col!r} not found (columns: {list(df.columns)})")
        if (df.columns == col).sum() > 1:
            raise DataError(f"{arg}: column {col!r} appears more than once in df", arg=arg,
                            problem=f"column {col!r} appears more than once")


def _weights(weights, n: int) -> np.ndarray | None:
    """``weights`` of :meth:`PairwiseData.from_arrays` as a (P,) float64 array (finite, > 0), or None
    when not given or every weight is 1."""
    if weights is None:
        return None
    arr = np.asarray(weights)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise DataError(f"weights: expected a 1-D array of one weight per label ({n}), got shape {arr.shape}",
                        arg="weights", problem=f"shape {arr.shape} where the labels have {n} rows")
    num = pd.to_numeric(pd.Series(arr), errors="coerce").to_numpy(np.float64)
    bad = np.flatnonzero(~np.isfinite(num) | (num <= 0))
    if bad.size:
        r = int(bad[0])
        problem = f"weight {_show(arr[r])} is not a number > 0 ({bad.size} row(s) affected)"
        raise DataError(f"weights: row {r}: {problem}", arg="weights", row=r, problem=problem)
    return None if np.all(num == 1.0) else num


@dataclass(frozen=True)
class PairwiseData:
    """Pairwise preference labels with item (and optional user) features.

    Attributes
    ----------
    a, b : (P,) int64 — positions of the two items of each pair in ``item_features``.
    y : (P,) float64 — 1.0 if a ≻ b, 0.0 if b ≻ a, 0.5 a tie (only when built with ``ties="model"``).
    item_features : (N, D) float64.
    users : (P,) int64 or None — positions in ``user_ids`` (None for single-user data).
    user_features : (U, E) float64 or None.
    item_ids, user_ids : the caller's ids, so that results come back labelled.
    source_rows : (P,) int64 or None — the row (position) of the frame each label was read from
        (:meth:`from_frame`; a tie under ``ties="half"`` gives two labels of one row, under
        ``ties="model"`` one; :meth:`from_counts`: up to four labels of one row), so that
        results per label can be written back beside the caller's rows; None for arrays.
    weights : (P,) float64 or None — each label's weight (> 0): a label of weight w enters every
        route's likelihood as w copies of it would (its log-likelihood times w); None: every label 1.
    tie_halves : (P,) bool or None — the labels that are halves of a tie (``ties="half"``: a tie
        written as a ≻ b and b ≻ a of weight ½ each); None where there are none.
    """

    a: np.ndarray
    b: np.ndarray
    y: np.ndarray
    item_features: np.ndarray
    users: np.ndarray | None = None
    user_features: np.ndarray | None = None
    item_ids: np.ndarray = field(default=None)
    user_ids: np.ndarray | None = None
    label_range: tuple[int, int, int] | None = None  # (lo, hi, P): one rank's labels lo..hi-1 of P
    source_rows: np.ndarray | None = None
    weights: np.ndarray | None = None
    tie_halves: np.ndarray | None = None

    @classmethod
    def read_shard(cls, path, rank: int | None = None, world: int | None = None, **kw) -> PairwiseData:
        """One rank's shard of a pairs CSV for a distributed fit, read without holding the whole file:
        :func:`crowdzoo.data.shard.read_shard` (``rank``/``world`` default to the torchrun launch's)."""
        return read_shard(cls, path, rank=rank, world=world, **kw)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(cls, a, b, y, item_features, users=None, user_features=None,
                    item_ids=None, user_ids=None, ties: str = "error", weights=None) -> PairwiseData:
        """Build from index arrays. ``a``, ``b`` index rows of ``item_features`` (N, D; D may be 0:
        items without features); ``users`` (optional) index rows of ``user_features`` (or count users
        0..U-1). ``y`` is 1 (a ≻ b) or 0 (b ≻ a); with ``ties="model"`` also 0.5, a tie kept as a third
        outcome for the models that have one (:mod:`crowdzoo.gp.ordinal`). ``weights`` (optional, one
        number > 0 per label): each label counts as that many copies of it (a weight of 2 is the label
        given twice); all 1 is stored as None. Warns (:class:`~crowdzoo.errors.DataWarning`) about
        constant or duplicated feature columns and about items that share one feature vector."""
        if ties not in ("error", "model"):
            raise DataError(f"ties: expected 'error' or 'model', got {ties!r}", arg="ties")
        data = cls._build(a, b, y, item_features, users, user_features, item_ids, user_ids,
                          ties_ok=ties == "model")
        return replace(data, weights=_weights(weights, data.n_pairs))

    @classmethod
    def _build(cls, a, b, y, item_features, users=None, user_features=None, item_ids=None, user_ids=None,
               items_name: str = "item_features", users_name: str = "user_features",
               ties_ok: bool = False) -> PairwiseData:
        """:meth:`from_arrays`, with the names that messages give the item and user tables (``ties_ok``:
        y may be 0.5)."""

        def ids_for(ids, table):  # the caller's ids, when they fit the table, name its rows in messages
            try:
                return None if ids is None or len(ids) != len(table) else np.asarray(ids)
            except TypeError:
                return None

        X = _features(items_name, item_features, ids_for(item_ids, item_features), "item")
        N = X.shape[0]
        lengths = {"a": np.size(a), "b": np.size(b), "y": np.size(y)}
        if users is not None:
            lengths["users"] = np.size(users)
        if len(set(lengths.values())) != 1:
            odd = next(k for k, v in lengths.items() if v != lengths["a"])
            raise DataError(f"mismatched lengths: {lengths}; a, b, y (and users) need one row per label",
                            arg=odd, problem=f"{lengths[odd]} rows where the labels have {lengths['a']}")
        if lengths["a"] == 0:
            raise DataError("a, b, y: empty data (no labels)", arg="a, b, y",
                            problem="empty data (no labels)")
        a = _int_index("a", a, N)
        b = _int_index("b", b, N)
        same = np.flatnonzero(a == b)
        if same.size:
            r = same[0]
            raise DataError(f"a, b: row {r}: a == b == {a[r]} (an item compared with itself)", arg="a, b",
                            row=int(r), problem=f"both are item {a[r]} (an item compared with itself)")
        y_arr = np.asarray(y)
        y_num = pd.to_numeric(pd.Series(y_arr.reshape(-1)), errors="coerce").to_numpy(np.float64)
        bad = np.flatnonzero(~np.isin(y_num, (0.0, 0.5, 1.0) if ties_ok else (0.0, 1.0)))
        if bad.size:
            r = bad[0]
            problem = f"label {_show(y_arr.reshape(-1)[r])} is outside {{0, 0.5, 1}}" if ties_ok else (
                f"label {_show(y_arr.reshape(-1)[r])} is outside {{0, 1}}")
            advice = ("0.5 a tie" if ties_ok else "drop or split ties before building the data, or pass "
                      "ties='model' to keep y = 0.5 as a tie")
            raise DataError(
                f"y: row {r}: {problem} (1 means a preferred to b; {advice})", arg="y", row=int(r),
                problem=problem)
        U_feat = None
        u = None
        if user_features is not None:
            U_feat = _features(users_name, user_features, ids_for(user_ids, user_features), "user")
        if users is not None:
            n_users = U_feat.shape[0] if U_feat is not None else int(np.max(users)) + 1
            if user_ids is not None:
                n_users = max(n_users, len(user_ids)) if U_feat is None else n_users
            u = _int_index("users", users, n_users)
            if user_ids is None:
                user_ids = np.arange(n_users)
        elif U_feat is not None:
            raise DataError("user_features given without users: pass users= (one user index per label)",
                            arg=users_name, problem="a table of users but no user per label")
        item_ids = np.arange(N) if item_ids is None else np.asarray(item_ids).copy()
        if len(item_ids) != N:
            raise DataError(f"item_ids: {len(item_ids)} ids for {N} feature rows", arg="item_ids")
        if user_ids is not None:
            user_ids = np.asarray(user_ids).copy()
            if U_feat is not None and len(user_ids) != U_feat.shape[0]:
                raise DataError(f"user_ids: {len(user_ids)} ids for {U_feat.shape[0]} user feature rows",
                                arg="user_ids")
        cols = lambda t: list(t.columns) if isinstance(t, pd.DataFrame) else None  # noqa: E731
        _feature_warnings(items_name, X, cols(item_features), item_ids, "item", rows_too=True)
        if U_feat is not None:
            _feature_warnings(users_name, U_feat, cols(user_features), user_ids, "user", rows_too=False)
        return cls(a=a, b=b, y=np.array(y_num, dtype=np.float64), item_features=X, users=u,
                   user_features=U_feat,
                   item_ids=item_ids, user_ids=user_ids)

    @classmethod
    def from_frame(cls, df: pd.DataFrame, items: pd.DataFrame | None = None, a: str = "a", b: str = "b",
                   y: str | None = "y", user: str | None = None, users: pd.DataFrame | None = None,
                   ties: str = "error", tie: str | None = None, weight: str | None = None) -> PairwiseData:
        """Build from a DataFrame of labels with named columns (and optional tables of items and users).

        ``df[a]``, ``df[b]`` hold item ids. ``df[y]`` is 1 where a ≻ b and 0 where b ≻ a; ``y=None``
        means every row is a ≻ b (a winner-first layout: ``a="winner", b="loser", y=None``).

        ``items`` is indexed by item id, every column a numeric feature; zero columns (items without
        features) is allowed. ``items=None``: the items are the ids seen in ``df[a]`` and ``df[b]``,
        **sorted** (in order of first appearance, row by row, when the ids cannot be sorted), with no
        feature columns.

        ``user`` names the user-id column; ``users`` (optional) is indexed by user id, every column a
        numeric feature. Without ``users`` the user ids are the sorted ids seen in ``df[user]``.

        Ties are rows with y = 0.5, or rows where the column ``tie`` (bool, 0/1 or yes/no) is true, whatever
        their y. ``ties="error"`` refuses them, ``"drop"`` leaves them out, ``"half"`` writes each
        as two labels, a ≻ b and b ≻ a, of weight ½ each, so that a tie counts as half a win each way
        (10 wins and 10 ties fit as 15 wins and 5 losses; it adds two labels to ``n_pairs``, marked in
        ``tie_halves``), and ``"model"`` keeps each as one label with y = 0.5, a third outcome for the
        models and routes that have a tie likelihood (:mod:`crowdzoo.gp.ordinal`; others refuse such
        data).

        ``weight`` names a column of each row's weight (a number > 0; a blank, zero, negative or
        non-numeric value is refused): the row counts as that many copies of it (a tie's halves take
        half of it each). Counts per pair are :meth:`from_counts`.

        Errors name the argument or column, the row of ``df`` (``row`` is its position, ``index`` its
        index label) and the item or user id; ``df``, ``items`` and ``users`` are never changed.
        Warns (:class:`~crowdzoo.errors.DataWarning`) about constant or duplicated feature columns
        and about items that share one feature vector.
        """
        for arg, frame, need in (("df", df, True), ("items", items, False), ("users", users, False)):
            if (need or frame is not None) and not isinstance(frame, pd.DataFrame):
                raise DataError(f"{arg}: expected a pandas DataFrame, got {type(frame).__name__}", arg=arg)
        if ties not in TIES:
            raise DataError(f"ties: expected one of {', '.join(map(repr, TIES))}, got {ties!r}", arg="ties")
        if users is not None and user is None:
            raise DataError("users: a users table needs user= (the column of df holding user ids)",
                            arg="user", problem="a table of users needs a column of user ids")
        _check_columns(df, {"a": a, "b": b, "y": y, "tie": tie, "user": user, "weight": weight})
        for arg, table, what in (("items", items, "item"), ("users", users, "user")):
            if table is not None and table.index.has_duplicates:
                dup = table.index[table.index.duplicated()][0]
                raise DataError(f"{arg}: index ({what} id) {_show(dup)} appears more than once", arg=arg,
                                problem=f"{what} id {_show(dup)} appears more than once")
            if table is not None and len(table) == 0:
                raise DataError(f"{arg}: no rows (a table of {what}s, indexed by {what} id)", arg=arg,
                                problem=f"no rows (no {what}s)")
        n = len(df)
        if n == 0:
            raise DataError("df: empty data (no labels)", arg="df")

        def where(r):
            return f"row {r} (index {_show(df.index[r])})"

        # ---- weights, labels and ties, over every row of df
        row_weight = np.ones(n) if weight is None else _amounts(weight, df[weight], where, "weight", False)
        is_tie = np.zeros(n, dtype=bool)
        flagged = np.zeros(n, dtype=bool)
        if tie is not None:
            flagged = _flags(tie, df[tie], where)
            is_tie |= flagged
        y_num = np.ones(n)
        if y is not None:
            y_raw = df[y].to_numpy()
            y_num = pd.to_numeric(df[y], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
            is_tie |= y_num == 0.5
            bad = np.flatnonzero(~is_tie & ~np.isin(y_num, (0.0, 1.0)))
            if bad.size:
                r = bad[0]
                what = "missing label" if pd.isna(y_raw[r]) else f"label {_show(y_raw[r])} is not 0 or 1"
                more = f" ({bad.size} rows affected)" if bad.size > 1 else ""
                raise DataError(
                    f"column {y!r}, {where(r)}: {what} (1: the item in {a!r} is preferred, 0: the one in "
                    f"{b!r}; 0.5 or a tie= column marks a tie){more}", arg="y", row=int(r),
                    problem=f"{what} (1: the item in column {a!r} is preferred, 0: the one in column {b!r}; "
                            f"0.5 marks a tie){more}")
        if ties == "error" and is_tie.any():
            r = int(np.flatnonzero(is_tie)[0])
            what = (f"column {tie!r}, {where(r)}: marked as a tie" if flagged[r]
                    else f"column {y!r}, {where(r)}: label {_show(y_raw[r])} is a tie")
            problem = (f"marked as a tie in column {tie!r}" if flagged[r]
                       else f"label {_show(y_raw[r])} in column {y!r} is a tie")
            problem += f" ({int(is_tie.sum())} tie(s) in all)"
            raise DataError(f"{what} ({int(is_tie.sum())} tie(s) in all): pass ties='drop' to leave ties "
                            "out, ties='half' to count each as half a win each way, or ties='model' to "
                            "model them as a third outcome", arg="ties", row=r,
                            problem=problem)
        kept = np.flatnonzero(~is_tie) if ties == "drop" else np.arange(n)
        if kept.size == 0:
            raise DataError("df: no labels left: every row is a tie and ties='drop' leaves them out",
                            arg="df", problem="no labels left: every row is a tie, and ties are left out")

        # ---- item ids → positions, over the kept rows
        ids = {}
        for arg, col in (("a", a), ("b", b)):
            vals = df[col].to_numpy()[kept]
            missing = np.flatnonzero(pd.isna(vals))
            if missing.size:
                r = int(kept[missing[0]])
                raise DataError(f"column {col!r}, {where(r)}: missing item id", arg=arg, row=r,
                                problem="missing item id")
            ids[arg] = vals
        if items is None:
            seen = pd.unique(np.column_stack([ids["a"], ids["b"]]).ravel())
            try:
                item_index = pd.Index(sorted(seen))
            except TypeError:  # ids of mixed types: in order of first appearance
                item_index = pd.Index(seen)
            features = np.zeros((len(item_index), 0))
        else:
            item_index, features = pd.Index(items.index), items
        pos = {}
        for arg, col in (("a", a), ("b", b)):
            idx = item_index.get_indexer(ids[arg])
            missing = np.flatnonzero(idx < 0)
            if missing.size:
                r = kept[missing[0]]
                problem = (f"item id {_show(df[col].iloc[r])} not found in items table ({missing.size} "
                           f"row(s) affected; the items' ids look like {_show(item_index[0])})")
                raise DataError(f"column {col!r}, {where(r)}: {problem}", arg=arg, row=int(r),
                                problem=problem, ids=list(pd.unique(ids[arg][missing])))
            pos[arg] = idx
        same = np.flatnonzero(pos["a"] == pos["b"])
        if same.size:
            r = kept[same[0]]
            problem = (f"both are item {_show(df[a].iloc[r])} (an item compared with itself; {same.size} "
                       "row(s) affected)")
            raise DataError(f"columns {a!r}, {b!r}, {where(r)}: {problem}", arg="a, b", row=int(r),
                            problem=problem)

        # ---- one label per kept row; a tie under ties="half" becomes a ≻ b and b ≻ a, ½ of its weight each
        twice = is_tie[kept] & (ties == "half")
        rows = np.repeat(np.arange(kept.size), np.where(twice, 2, 1))
        second = np.zeros(rows.size, dtype=bool)
        second[1:] = rows[1:] == rows[:-1]  # the b ≻ a copy of a tie
        la = np.where(second, pos["b"][rows], pos["a"][rows])
        lb = np.where(second, pos["a"][rows], pos["b"][rows])
        ly = np.where(twice[rows], 1.0, np.where(is_tie[kept][rows], 0.5, y_num[kept][rows]))

        kw = {}
        if user:
            vals = df[user].to_numpy()[kept]
            missing = np.flatnonzero(pd.isna(vals))
            if missing.size:
                r = int(kept[missing[0]])
                raise DataError(f"column {user!r}, {where(r)}: missing user id", arg="user", row=r,
                                problem="missing user id")
            if users is not None:
                idx = pd.Index(users.index).get_indexer(vals)
                missing = np.flatnonzero(idx < 0)
                if missing.size:
                    r = kept[missing[0]]
                    problem = (f"user id {_show(df[user].iloc[r])} not found in users table "
                               f"({missing.size} row(s) affected)")
                    raise DataError(f"column {user!r}, {where(r)}: {problem}", arg="user", row=int(r),
                                    problem=problem, ids=list(pd.unique(vals[missing])))
                kw.update(users=idx[rows], user_features=users, user_ids=users.index.to_numpy())
            else:
                try:
                    codes, uniq = pd.factorize(vals, sort=True)
                except TypeError:
                    codes, uniq = pd.factorize(vals)
                kw.update(users=codes[rows], user_ids=np.asarray(uniq))
        data = cls._build(la, lb, ly, features, item_ids=item_index.to_numpy(), items_name="items",
                          users_name="users", ties_ok=ties == "model", **kw)
        lw = row_weight[kept][rows] * np.where(twice[rows], 0.5, 1.0)
        return replace(data, source_rows=kept[rows], weights=None if np.all(lw == 1.0) else lw,
                       tie_halves=twice[rows] if twice.any() else None)

    @classmethod
    def from_counts(cls, df: pd.DataFrame, items: pd.DataFrame | None = None, a: str = "a", b: str = "b",
                    wins: str = "wins", losses: str = "losses", tied: str | None = None,
                    user: str | None = None, users: pd.DataFrame | None = None,
                    ties: str = "error") -> PairwiseData:
        """Build from a DataFrame of counts per pair: each row a pair ``df[a]``, ``df[b]`` (and user
        ``df[user]``) with how often a ≻ b (``df[wins]``), b ≻ a (``df[losses]``) and, with ``tied``, how
        often the two tied. Each row becomes up to three weighted labels, in its own orientation: a ≻ b
        of weight wins, b ≻ a (y = 0) of weight losses, and its ties by the ``ties`` rule of
        :meth:`from_frame`: ``"error"`` refuses a row with ties, ``"drop"`` leaves them out, ``"half"``
        writes them as a ≻ b and b ≻ a of weight ties/2 each (so that 10 wins and 10 ties fit as 15 wins
        and 5 losses), ``"model"`` as one label y = 0.5 of weight ties. A count of 0 gives no label.

        Counts are whole numbers ≥ 0: a blank, negative, fractional or non-numeric count is refused,
        naming its column and row, and so is a row whose counts are all 0 (a row of ties alone is left
        out under ``ties="drop"``). Fractional weights are :meth:`from_frame`'s ``weight=``.
        ``source_rows`` maps each label to its row. ``items``, ``user`` and ``users`` as for
        :meth:`from_frame`, which reads and checks the pairs and users of the rows; ``df`` is never
        changed."""
        if not isinstance(df, pd.DataFrame):
            raise DataError(f"df: expected a pandas DataFrame, got {type(df).__name__}", arg="df")
        if ties not in TIES:
            raise DataError(f"ties: expected one of {', '.join(map(repr, TIES))}, got {ties!r}", arg="ties")
        named = {"wins": wins, "losses": losses, "tied": tied}
        _check_columns(df, named)
        if len(df) == 0:
            raise DataError("df: empty data (no labels)", arg="df")

        def where(r):
            return f"row {r} (index {_show(df.index[r])})"

        n = {arg: _amounts(col, df[col], where, arg, whole=True) if col else np.zeros(len(df))
             for arg, col in named.items()}
        given = [repr(col) for col in named.values() if col]
        empty = np.flatnonzero(n["wins"] + n["losses"] + n["tied"] == 0)
        if empty.size:
            r = int(empty[0])
            problem = (f"every count ({', '.join(given)}) is 0: the row holds no label ({empty.size} row(s) "
                       "affected); leave it out")
            raise DataError(f"{where(r)}: {problem}", arg="wins, losses", row=r, problem=problem)
        if ties == "error" and n["tied"].any():
            r = int(np.flatnonzero(n["tied"])[0])
            k = int((n["tied"] > 0).sum())
            problem = f"{int(n['tied'][r])} tie(s) in column {tied!r} ({k} row(s) with ties)"
            raise DataError(f"{where(r)}: {problem}: pass ties='drop' to leave ties out, "
                            "ties='half' to count each as half a win each way, or ties='model' to model them "
                            "as a third outcome", arg="ties", row=r, problem=problem)
        t = n["tied"] * (ties != "drop")
        # one label a ≻ b per row that holds a label, its pair and user read and checked by from_frame
        flag = "__crowdzoo_no_label__"
        while flag in df.columns:
            flag += "_"
        none = n["wins"] + n["losses"] + t == 0
        if none.all():
            raise DataError("df: no labels left: every row holds ties alone and ties='drop' leaves them out",
                            arg="df", problem="no labels left: every row holds ties alone, left out")
        base = cls.from_frame(df.assign(**{flag: none}), items, a=a, b=b, y=None, user=user, users=users,
                              tie=flag, ties="drop")
        r = base.source_rows
        half = ties == "half"
        # slots: a ≻ b (wins), b ≻ a (losses), the ties (under "half" their a ≻ b half), their b ≻ a half
        amount = np.column_stack([n["wins"][r], n["losses"][r], t[r] / (2 if half else 1), t[r] / 2])
        lab, slot = np.nonzero(amount * [1, 1, 1, half] > 0)  # row by row, in slot order
        swap = slot == 3
        ly = np.select([slot == 0, slot == 1, half | swap], [1.0, 0.0, 1.0], 0.5)
        lw = amount[lab, slot]
        halves = (slot >= 2) & half
        return replace(base, a=np.where(swap, base.b[lab], base.a[lab]),
                       b=np.where(swap, base.a[lab], base.b[lab]), y=ly,
                       users=None if base.users is None else base.users[lab], source_rows=r[lab],
                       weights=None if np.all(lw == 1.0) else lw, tie_halves=halves if halves.any() else None)

    # ------------------------------------------------------------------ views
    @property
    def n_items(self) -> int:
        return self.item_features.shape[0]

    @property
    def n_pairs(self) -> int:
        return self.a.shape[0]

    @property
    def has_ties(self) -> bool:
        """Whether some label is a tie (y = 0.5, kept by ``ties="model"``)."""
        return bool(np.any(self.y == 0.5))

    @property
    def n_users(self) -> int:
        return 0 if self.user_ids is None else len(self.user_ids)

    @property
    def label_weights(self) -> np.ndarray:
        """Each label's weight (P,) float64: ``weights``, or ones where it is None."""
        return np.ones(self.n_pairs) if self.weights is None else self.weights

    def to_frame(self) -> pd.DataFrame:
        """One row per label with the caller's ids: columns a, b, y (and user, and weight when the labels
        are weighted); y is an integer 0/1, or a float 0/0.5/1 when some label is a tie."""
        out = {"a": self.item_ids[self.a], "b": self.item_ids[self.b]}
        if self.users is not None:
            out = {"user": self.user_ids[self.users], **out}
        out["y"] = self.y.copy() if self.has_ties else self.y.astype(np.int64)
        if self.weights is not None:
            out["weight"] = self.weights.copy()
        return pd.DataFrame(out)

    def items_frame(self) -> pd.DataFrame:
        """Item features indexed by item id."""
        D = self.item_features.shape[1]
        return pd.DataFrame(self.item_features, index=pd.Index(self.item_ids, name="item"),
                            columns=[f"x{d}" for d in range(D)])

    def subset(self, rows) -> PairwiseData:
        """The labels in ``rows`` (indices or boolean mask), with their weights and tie halves; item and
        user tables are kept whole."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        if rows.size == 0:
            raise DataError("subset: no rows selected", arg="rows", problem="no rows selected")
        def pick(x):
            return None if x is None else x[rows]

        halves, weights = pick(self.tie_halves), pick(self.weights)
        return PairwiseData(a=self.a[rows], b=self.b[rows], y=self.y[rows],
                            item_features=self.item_features, users=pick(self.users),
                            user_features=self.user_features, item_ids=self.item_ids,
                            user_ids=self.user_ids, source_rows=pick(self.source_rows),
                            weights=None if weights is None or np.all(weights == 1.0) else weights,
                            tie_halves=halves if halves is not None and halves.any() else None)

    def __repr__(self) -> str:
        u = f", users={self.n_users}" if self.users is not None else ""
        sh = ""
        if self.label_range is not None:
            lo, hi, P = self.label_range
            sh = f", shard=labels {lo}..{hi - 1} of {P}"
        w = "" if self.weights is None else f", weight={self.weights.sum():g}"
        return (f"PairwiseData(pairs={self.n_pairs}{w}, items={self.n_items}, "
                f"item_dims={self.item_features.shape[1]}{u}{sh})")
