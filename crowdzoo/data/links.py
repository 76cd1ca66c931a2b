"""`LinkData`: which pairs of items crowd workers said are in the same cluster (semi-crowdsourced clustering).

Per annotation: ``worker`` (worker position), ``i``, ``j`` (item positions) and ``same`` (1.0 must-link:
"same cluster", 0.0 cannot-link: "different clusters"); per item an observation row of ``O`` (N, D),
whether or not any worker saw the item. The caller's worker and item ids are kept so that results come
back labelled with them. This is the data of SCDC / BayesSCDC (Luo et al., NeurIPS 2018), whose
two-coin worker model says a worker gives a must-link to a same-cluster pair with probability α_m
(sensitivity) and a cannot-link to a different-cluster pair with probability β_m (specificity).

Validation happens here, at the boundary, as in :mod:`crowdzoo.data.pairwise`: every error is a
:class:`~crowdzoo.errors.DataError` naming the argument or column, the row and the problem. Nothing is
repaired silently and the caller's arrays and frames are copied, never changed. Zero annotations is
valid (clustering without a crowd); zero items is not.
"""
from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import DataError, DataWarning, _show
from .pairwise import _check_columns, flag_numbers
from .shard import rank_world, read_links_shard

__all__ = ["LinkData", "same_cluster_counts"]


# ---------------------------------------------------------------------------------------------- helpers
def _rows(r) -> str:
    return f"row {r}"


def _array(x) -> np.ndarray:
    """``x`` as a numpy array without changing the caller's values: a list mixing strings with other
    values stays an object array (``np.asarray`` would turn every value into a string)."""
    if isinstance(x, (pd.Series, pd.Index)):
        return x.to_numpy()
    arr = np.asarray(x)
    if arr.dtype.kind in "US" and arr.ndim == 1 and not isinstance(x, np.ndarray):
        if any(not isinstance(v, str | bytes) for v in x):
            arr = np.empty(len(x), dtype=object)
            arr[:] = list(x)
    return arr


def _observations(O, item_ids=None) -> np.ndarray:
    """``O`` (items × features; an array or a DataFrame of numeric columns) as a fresh float64 array.
    Errors name the row (and the item id, when ids are known) and the column."""
    cols = None
    if isinstance(O, pd.DataFrame):
        cols = list(O.columns)
        for c, col in enumerate(O.columns):
            s = O.iloc[:, c]
            if not pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
                bad = np.flatnonzero(pd.to_numeric(s, errors="coerce").isna())
                r = int(bad[0]) if bad.size else 0
                raise DataError(f"O: column {c} ({col!r}) is not numeric (row {r}: {_show(s.iloc[r])})",
                                arg="O", row=r,
                                problem=f"column {c} ({col!r}) is not numeric ({_show(s.iloc[r])})")
        O = O.to_numpy(dtype=np.float64, na_value=np.nan)
    try:
        arr = np.asarray(O)
    except ValueError as e:  # ragged nested lists
        raise DataError(f"O: cannot be read as a 2-D array (items × features): {e}", arg="O") from None
    if arr.ndim != 2:
        raise DataError(f"O: expected a 2-D array (items × features), got shape {arr.shape}"
                        + ("; for one feature per item pass O[:, None]" if arr.ndim == 1 else ""), arg="O",
                        problem=f"expected a 2-D table (items × features), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise DataError("O: no rows (no items); O needs one row per item, annotated or not", arg="O",
                        problem="no rows (no items); every item needs a row, annotated or not")
    if arr.shape[1] == 0:
        raise DataError("O: no columns; every item needs at least one observed feature", arg="O")
    if arr.dtype.kind not in "iuf":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            flat = arr.reshape(-1)
            for k in range(flat.size):  # find the first offending value for the message
                try:
                    float(flat[k])
                except (TypeError, ValueError):
                    r, c = divmod(k, arr.shape[1])
                    raise DataError(f"O: row {r}, column {c}: {_show(flat[k])} is not numeric",
                                    arg="O", row=r,
                                    problem=f"column {c}: {_show(flat[k])} is not numeric") from None
    arr = np.array(arr, dtype=np.float64, copy=True)
    bad = np.argwhere(~np.isfinite(arr))
    if bad.size:
        r, c = bad[0]
        item = f" (item {_show(item_ids[r])})" if item_ids is not None and len(item_ids) == len(arr) else ""
        col = f" ({cols[c]!r})" if cols is not None else ""
        more = f"; {len(bad)} values in all" if len(bad) > 1 else ""
        problem = (f"{item[2:-1] + ', ' if item else ''}column {c}{col}: value {arr[r, c]} is not finite "
                   "(NaN or inf)")
        raise DataError(f"O: row {r}{item}, column {c}{col}: value {arr[r, c]} is not finite (NaN or inf)"
                        f"{more}", arg="O", row=int(r), problem=problem + more)
    return arr


def _ids(name: str, ids, n: int | None, what: str) -> np.ndarray:
    """A copy of the caller's ids as a 1-D array, checked for length ``n`` (when given), missing values
    and repeats."""
    arr = _array(ids)
    if arr.ndim != 1:
        raise DataError(f"{name}: expected a 1-D array of {what} ids, got shape {arr.shape}", arg=name)
    if n is not None and arr.size != n:
        rows = " (rows of O)" if what == "item" else ""
        raise DataError(f"{name}: {arr.size} ids for {n} {what}s{rows}", arg=name,
                        problem=f"{arr.size} ids for {n} {what}s")
    missing = np.flatnonzero(pd.isna(arr))
    if missing.size:
        raise DataError(f"{name}: row {missing[0]}: missing {what} id", arg=name, row=int(missing[0]),
                        problem=f"missing {what} id")
    index = pd.Index(arr)
    if index.has_duplicates:
        dup = index[index.duplicated()][0]
        raise DataError(f"{name}: {what} id {_show(dup)} appears more than once", arg=name)
    return arr.copy()


def _integer_like(arr: np.ndarray) -> bool:
    return arr.dtype.kind in "iu" or (arr.dtype == object and arr.size > 0
                                       and pd.api.types.infer_dtype(arr, skipna=True) == "integer")


def _present_1d(name: str, arr: np.ndarray, what: str, one: str, where: Callable[[int], str],
                arg: str | None = None) -> np.ndarray:
    """``arr`` if it is 1-D with no missing value, else a DataError naming ``name`` (the argument
    ``arg``, default ``name``) and the row."""
    arg = arg or name
    if arr.ndim != 1:
        raise DataError(f"{name}: expected a 1-D array of {what}, got shape {arr.shape}", arg=arg,
                        problem=f"expected a 1-D array of {what}, got shape {arr.shape}")
    missing = np.flatnonzero(pd.isna(arr)) if arr.size else np.zeros(0, dtype=np.int64)
    if missing.size:
        problem = f"missing {one} ({missing.size} row(s) affected)"
        raise DataError(f"{name}, {where(missing[0])}: {problem}", arg=arg, row=int(missing[0]),
                        problem=problem)
    return arr


def _lookup(name: str, x, ids: np.ndarray | None, n: int, mode: str, what: str,
            where: Callable[[int], str] = _rows, arg: str | None = None) -> np.ndarray:
    """Positions (int64, in [0, n)) of ``x``: as positions (``mode="position"``) or looked up in
    ``ids`` (``mode="id"``); errors name ``name`` (the argument ``arg``, default ``name``)."""
    arg = arg or name
    arr = _present_1d(name, _array(x), f"{what} {'ids' if mode == 'id' else 'indices'}", f"{what} id", where,
                      arg)
    if mode == "id":
        idx = pd.Index(ids).get_indexer(arr) if arr.size else np.zeros(0, dtype=np.int64)
        bad = np.flatnonzero(idx < 0)
        if bad.size:
            r = bad[0]
            problem = (f"{what} id {_show(arr[r])} not found among the {what} ids ({bad.size} row(s) "
                       f"affected; the ids look like {_show(ids[0])})")
            raise DataError(f"{name}, {where(r)}: {problem}", arg=arg, row=int(r), problem=problem,
                            ids=list(pd.unique(arr[bad])))
        return idx.astype(np.int64)
    if arr.size and arr.dtype.kind not in "iu":
        as_float = pd.to_numeric(pd.Series(arr), errors="coerce").to_numpy(np.float64)
        bad = np.flatnonzero(~np.isfinite(as_float) | (as_float != np.round(as_float)))
        if bad.size:
            r = bad[0]
            raise DataError(f"{name}, {where(r)}: {_show(arr[r])} is not an integer {what} index "
                            f"(pass {what}_ids= to give {what}s by id)", arg=arg, row=int(r),
                            problem=f"{_show(arr[r])} is not an integer {what} index")
        arr = as_float
    arr = np.array(arr, dtype=np.int64, copy=True)
    bad = np.flatnonzero((arr < 0) | (arr >= n))
    if bad.size:
        r = bad[0]
        problem = f"{what} index {arr[r]} is out of range [0, {n}) ({bad.size} row(s) affected)"
        raise DataError(f"{name}, {where(r)}: {problem}", arg=arg, row=int(r), problem=problem)
    return arr


def _factorize(vals) -> tuple[np.ndarray, np.ndarray]:
    """Codes and ids of ``vals``, ids sorted (in order of first appearance when they cannot be sorted),
    as :meth:`PairwiseData.from_frame` does for user ids."""
    vals = np.asarray(vals)
    try:
        codes, uniq = pd.factorize(vals, sort=True)
    except TypeError:
        codes, uniq = pd.factorize(vals)
    return codes.astype(np.int64), np.asarray(uniq)


def _same(name: str, x, where: Callable[[int], str] = _rows, arg: str | None = None) -> np.ndarray:
    arg = arg or name
    arr = _array(x)
    if arr.ndim != 1:
        raise DataError(f"{name}: expected a 1-D array of 0/1 labels, got shape {arr.shape}", arg=arg,
                        problem=f"expected a 1-D array of 0/1 labels, got shape {arr.shape}")
    num = (pd.to_numeric(flag_numbers(pd.Series(arr)), errors="coerce").to_numpy(np.float64) if arr.size
           else np.zeros(0))
    bad = np.flatnonzero(~np.isin(num, (0.0, 1.0)))
    if bad.size:
        r = bad[0]
        what = "missing label" if pd.isna(arr[r]) else f"label {_show(arr[r])} is not a link label"
        problem = (f"{what} (1, true or yes: must-link, same cluster; 0, false or no: cannot-link, different "
                   f"clusters; {bad.size} row(s) affected)")
        raise DataError(f"{name}, {where(r)}: {problem}", arg=arg, row=int(r), problem=problem)
    return np.array(num, dtype=np.float64)


# ---------------------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class LinkData:
    """Crowd must-link / cannot-link annotations on pairs of items, with observations of every item.

    Attributes
    ----------
    worker : (A,) int64 — position in ``worker_ids`` of the worker who gave each annotation.
    i, j : (A,) int64 — positions of the two items of each annotation (rows of ``O``), i ≠ j.
    same : (A,) float64 — 1.0 must-link (same cluster), 0.0 cannot-link (different clusters).
    O : (N, D) float64 — observations of all N items, annotated or not.
    worker_ids : (W,) the caller's worker ids (default 0..W-1).
    item_ids : (N,) the caller's item ids (default 0..N-1).
    labels : (N,) true classes, for evaluation only, or None.
    annotation_range : (lo, hi, A) when this holds one rank's shard of the annotations for a distributed
        fit — annotations lo..hi-1 of the whole data's A (:meth:`shard`, :meth:`read_shard`); else None.
    """

    worker: np.ndarray
    i: np.ndarray
    j: np.ndarray
    same: np.ndarray
    O: np.ndarray
    worker_ids: np.ndarray
    item_ids: np.ndarray
    labels: np.ndarray | None = None
    annotation_range: tuple | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(cls, i, j, same, O, workers=None, worker_ids=None, item_ids=None, labels=None,
                    index: str = "auto") -> LinkData:
        """Build from per-annotation arrays and the observation table.

        Parameters
        ----------
        i, j : (A,) the two items of each annotation, as positions (rows of ``O``) or as ids.
        same : (A,) 1 (or True) for must-link, 0 (or False) for cannot-link.
        O : (N, D) observations of every item (array or DataFrame of numeric columns).
        workers : (A,) worker of each annotation, or None (every annotation from one worker).
        worker_ids : (W,) the workers' ids; workers who gave no annotation may be listed too.
        item_ids : (N,) the items' ids, one per row of ``O`` (default 0..N-1).
        labels : (N,) true classes (any hashable values), for evaluation only.
        index : ``"auto"``, ``"position"`` or ``"id"`` — how ``i``, ``j`` (and ``workers``) are read.
            ``"auto"``: without ``item_ids``, ``i`` and ``j`` are positions; with ``item_ids``, they are
            ids, except that integers are taken as positions when the ids are not integers (e.g. string
            ids). The same rule applies to ``workers`` and ``worker_ids``. Without ``worker_ids``,
            ``workers`` holds worker ids of any hashable type and the worker ids are the **sorted** distinct
            values (in order of first appearance when they cannot be sorted), as
            :meth:`PairwiseData.from_frame` does for users.

        Notes
        -----
        Zero annotations is valid. Errors (:class:`~crowdzoo.errors.DataError`) name the argument, the
        row and the problem; nothing given is changed.
        """
        if index not in ("auto", "position", "id"):
            raise DataError(f"index: expected 'auto', 'position' or 'id', got {index!r}", arg="index")
        return cls._build(i, j, same, O, workers, worker_ids, item_ids, labels, index=index)

    @classmethod
    def _build(cls, i, j, same, O, workers, worker_ids, item_ids, labels, index: str = "auto",
               names: dict | None = None, where: Callable[[int], str] = _rows,
               args: dict | None = None) -> LinkData:
        names = {"i": "i", "j": "j", "same": "same", "workers": "workers", **(names or {})}
        args = {"i": "i", "j": "j", "same": "same", "workers": "workers", **(args or {})}  # caller's names
        if item_ids is not None:
            try:
                len(item_ids)
            except TypeError:
                raise DataError(f"item_ids: expected a sequence of ids, got {type(item_ids).__name__}",
                                arg="item_ids") from None
        X = _observations(O, None if item_ids is None else _array(item_ids))
        N = X.shape[0]
        ids_given = item_ids is not None
        item_ids = np.arange(N) if item_ids is None else _ids("item_ids", item_ids, N, "item")
        lengths = {names["i"]: np.size(i), names["j"]: np.size(j), names["same"]: np.size(same)}
        if workers is not None:
            lengths[names["workers"]] = np.size(workers)
        if len(set(lengths.values())) != 1:
            odd = next(k for k in args if k in names and names[k] in lengths
                       and lengths[names[k]] != lengths[names["i"]])
            raise DataError(f"mismatched lengths: {lengths}; each needs one row per annotation",
                            arg=args[odd], problem=f"{lengths[names[odd]]} rows where the first items have "
                                    f"{lengths[names['i']]}")
        A = lengths[names["i"]]

        def mode(x, ids, given):
            if index != "auto":
                return index
            if not given:
                return "position"
            return "id" if (not _integer_like(_array(x)) or _integer_like(ids)) else "position"

        ii = _lookup(names["i"], i, item_ids, N, mode(i, item_ids, ids_given), "item", where, args["i"])
        jj = _lookup(names["j"], j, item_ids, N, mode(j, item_ids, ids_given), "item", where, args["j"])
        self_pair = np.flatnonzero(ii == jj)
        if self_pair.size:
            r = self_pair[0]
            problem = (f"both are item {_show(item_ids[ii[r]])} (an item paired with itself; "
                       f"{self_pair.size} row(s) affected)")
            raise DataError(f"{names['i']}, {names['j']}, {where(r)}: i == j == item "
                            f"{_show(item_ids[ii[r]])} (an item paired with itself; {self_pair.size} row(s) "
                            "affected)", arg=f"{args['i']}, {args['j']}", row=int(r), problem=problem)
        y = _same(names["same"], same, where, args["same"])

        if worker_ids is not None:
            worker_ids = _ids("worker_ids", worker_ids, None, "worker")
        if workers is None:
            if worker_ids is None:
                worker_ids = np.arange(1 if A else 0)
            elif worker_ids.size != 1 and A:
                raise DataError(f"workers: not given, but worker_ids lists {worker_ids.size} workers; pass "
                                "workers= (the worker of each annotation)", arg=args["workers"],
                                problem=f"no worker per annotation, but {worker_ids.size} workers are listed")
            w = np.zeros(A, dtype=np.int64)
        elif worker_ids is None:
            w_arr = _present_1d(names["workers"], _array(workers), "worker ids", "worker id", where,
                                args["workers"])
            w, worker_ids = _factorize(w_arr)
        else:
            if worker_ids.size == 0 and A:
                raise DataError("worker_ids: empty, but there are annotations", arg="worker_ids")
            w = _lookup(names["workers"], workers, worker_ids, worker_ids.size,
                        mode(workers, worker_ids, True), "worker", where, args["workers"])

        lab = None
        if labels is not None:
            lab = _array(labels).copy()
            if lab.ndim != 1:
                raise DataError(f"labels: expected a 1-D array (one class per item), got shape {lab.shape}",
                                arg="labels")
            if lab.size != N:
                raise DataError(f"labels: {lab.size} labels for {N} items (rows of O)", arg="labels",
                                problem=f"{lab.size} labels for {N} items")
            missing = np.flatnonzero(pd.isna(lab))
            if missing.size:
                r = missing[0]
                problem = f"item {_show(item_ids[r])}: missing label ({missing.size} row(s) affected)"
                raise DataError(f"labels: row {r} (item {_show(item_ids[r])}): missing label "
                                f"({missing.size} row(s) affected)", arg="labels", row=int(r),
                                problem=problem)
        return cls(worker=np.asarray(w, dtype=np.int64).copy(), i=ii, j=jj, same=y, O=X,
                   worker_ids=np.asarray(worker_ids).copy(), item_ids=item_ids, labels=lab)

    @classmethod
    def from_frame(cls, df: pd.DataFrame, O, i: str = "i", j: str = "j", same: str = "same",
                   worker: str | None = "worker", item_ids=None, labels=None, worker_ids=None) -> LinkData:
        """Build from a DataFrame of annotations (one row each) with named columns.

        ``df[i]``, ``df[j]`` hold item ids: ``item_ids`` (one per row of ``O``) when given, else the index
        of ``O`` when it is a DataFrame, else the positions 0..N-1. ``df[same]`` is 1/True for must-link
        and 0/False for cannot-link. ``df[worker]`` holds worker ids (``worker=None``: one worker); the
        worker ids are ``worker_ids`` when given, else the sorted distinct values of the column.
        ``labels`` (N,) are the items' true classes, for evaluation only.

        Errors name the column, the row of ``df`` (its position and index label) and the problem; ``df``
        and ``O`` are never changed. Round-trips with :meth:`to_frame`.
        """
        if not isinstance(df, pd.DataFrame):
            raise DataError(f"df: expected a pandas DataFrame, got {type(df).__name__}", arg="df")
        for arg, col in (("i", i), ("j", j), ("same", same)):
            if col is None:  # only the worker column is optional
                raise DataError(f"{arg}: a column name is required (columns: {list(df.columns)})", arg=arg)
        _check_columns(df, {"i": i, "j": j, "same": same, "worker": worker})
        if item_ids is None and isinstance(O, pd.DataFrame):
            item_ids = O.index.to_numpy()
        if len(df) == 0:
            warnings.warn(DataWarning("df: no annotations (the table has no rows); the fit will cluster the "
                                      "items from their observations alone", arg="df"), stacklevel=2)

        def where(r):
            return f"row {r} (index {_show(df.index[r])})"

        names = {"i": f"column {i!r}", "j": f"column {j!r}", "same": f"column {same!r}",
                 "workers": f"column {worker!r}"}
        return cls._build(df[i].to_numpy(), df[j].to_numpy(), df[same].to_numpy(), O,
                          None if worker is None else df[worker].to_numpy(), worker_ids, item_ids, labels,
                          index="id", names=names, where=where, args={"workers": "worker"})

    # ------------------------------------------------------------------ views
    @property
    def n_items(self) -> int:
        return self.O.shape[0]

    @property
    def n_workers(self) -> int:
        return len(self.worker_ids)

    @property
    def n_annotations(self) -> int:
        return self.i.shape[0]

    @property
    def n_features(self) -> int:
        return self.O.shape[1]

    def to_frame(self) -> pd.DataFrame:
        """One row per annotation with the caller's ids: columns worker, i, j, same (int 0/1)."""
        return pd.DataFrame({"worker": self.worker_ids[self.worker], "i": self.item_ids[self.i],
                             "j": self.item_ids[self.j], "same": self.same.astype(np.int64)})

    def annotated_items(self) -> np.ndarray:
        """Sorted positions (rows of ``O``) of the items in at least one annotation."""
        return np.unique(np.concatenate([self.i, self.j]))

    def subset(self, rows) -> LinkData:
        """The annotations in ``rows`` (positions or a boolean mask; may select none); items, workers and
        labels are kept whole."""
        rows = np.asarray(rows)
        A = self.n_annotations
        if rows.dtype == bool:
            if rows.shape != (A,):
                raise DataError(f"rows: boolean mask of shape {rows.shape} for {A} annotations", arg="rows")
            rows = np.flatnonzero(rows)
        if rows.ndim != 1:
            raise DataError(f"rows: expected a 1-D array of positions, got shape {rows.shape}", arg="rows")
        if rows.size and rows.dtype.kind not in "iu":
            raise DataError(f"rows: expected integer positions or a boolean mask, got dtype {rows.dtype}",
                            arg="rows")
        rows = rows.astype(np.int64)
        bad = np.flatnonzero((rows < -A) | (rows >= A))
        if bad.size:
            raise DataError(f"rows: row {bad[0]}: position {rows[bad[0]]} is out of range for {A} "
                            "annotations", arg="rows", row=int(bad[0]),
                            problem=f"position {rows[bad[0]]} is out of range for {A} annotations")
        return LinkData(worker=self.worker[rows], i=self.i[rows], j=self.j[rows], same=self.same[rows],
                        O=self.O, worker_ids=self.worker_ids, item_ids=self.item_ids, labels=self.labels)

    def shard(self, rank: int | None = None, world: int | None = None) -> LinkData:
        """Rank ``rank`` of ``world``'s contiguous share of the annotations, lo = A·r/R to hi = A·(r+1)/R,
        for a distributed BayesSCDC fit (``annotation_range`` = (lo, hi, A)); the items' observations,
        the workers and the labels are kept whole. ``rank``/``world`` default to the torchrun launch's.
        To read only a share from a file, without the whole in memory: :meth:`read_shard`."""
        if self.annotation_range is not None:
            raise DataError(f"data: already a shard (annotations {self.annotation_range[0]}.."
                            f"{self.annotation_range[1] - 1} of {self.annotation_range[2]})", arg="data")
        rank, world = rank_world(rank, world)
        A = self.n_annotations
        lo, hi = A * rank // world, A * (rank + 1) // world
        return dataclasses.replace(self.subset(np.arange(lo, hi)), annotation_range=(lo, hi, A))

    @classmethod
    def read_shard(cls, path, O, **kw) -> LinkData:
        """One rank's share of an annotations CSV, read without holding the whole file:
        :func:`crowdzoo.data.shard.read_links_shard`."""
        return read_links_shard(cls, path, O, **kw)

    @property
    def is_shard(self) -> bool:
        """Whether this holds only part of the annotations (one rank's, :meth:`shard`)."""
        r = self.annotation_range
        return r is not None and (r[0], r[1]) != (0, r[2])

    def without_annotations(self) -> LinkData:
        """The same items (and workers) with no annotations: clustering without a crowd."""
        return self.subset(np.zeros(0, dtype=np.int64))

    def __repr__(self) -> str:
        lab = ", labels" if self.labels is not None else ""
        if self.annotation_range is not None:
            lo, hi, A = self.annotation_range
            lab += f", shard: annotations {lo}..{hi - 1} of {A}"
        return (f"LinkData(annotations={self.n_annotations}, workers={self.n_workers}, items={self.n_items}, "
                f"features={self.n_features}{lab})")


def same_cluster_counts(data: LinkData, z) -> pd.DataFrame:
    """Closed-form two-coin estimates of each worker's sensitivity and specificity given a clustering.

    With hard cluster assignments ``z`` (N,; any hashable values), an annotation's pair is a
    same-cluster pair when z_i = z_j. Per worker m:

    - ``n_same``: annotations on same-cluster pairs; ``n_same_ml``: those that are must-links;
    - ``n_diff``: annotations on different-cluster pairs; ``n_diff_cl``: those that are cannot-links;
    - ``alpha_hat`` = n_same_ml / n_same (estimate of α_m = P(ML | same)), NaN when n_same = 0;
    - ``beta_hat`` = n_diff_cl / n_diff (estimate of β_m = P(CL | different)), NaN when n_diff = 0.

    Returns a DataFrame indexed by worker id (every worker in ``data.worker_ids``) with columns
    alpha_hat, beta_hat, n_same_ml, n_same, n_diff_cl, n_diff.
    """
    z = np.asarray(z)
    if z.ndim != 1:
        raise DataError(f"z: expected one cluster per item (shape ({data.n_items},)), got shape {z.shape}",
                        arg="z")
    if z.size != data.n_items:
        raise DataError(f"z: {z.size} cluster assignments for {data.n_items} items", arg="z")
    codes, _ = pd.factorize(z)
    if (codes < 0).any():
        r = int(np.flatnonzero(codes < 0)[0])
        raise DataError(f"z: row {r} (item {_show(data.item_ids[r])}): missing cluster assignment", arg="z",
                        row=r, problem=f"item {_show(data.item_ids[r])}: missing cluster assignment")
    W = data.n_workers
    s = codes[data.i] == codes[data.j]
    ml = data.same == 1.0

    def count(mask):
        return np.bincount(data.worker, weights=mask.astype(np.float64), minlength=W).astype(np.int64)

    n_same, n_diff = count(s), count(~s)
    n_same_ml, n_diff_cl = count(s & ml), count(~s & ~ml)
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = np.where(n_same > 0, n_same_ml / np.maximum(n_same, 1), np.nan)
        beta = np.where(n_diff > 0, n_diff_cl / np.maximum(n_diff, 1), np.nan)
    return pd.DataFrame({"alpha_hat": alpha, "beta_hat": beta, "n_same_ml": n_same_ml, "n_same": n_same,
                         "n_diff_cl": n_diff_cl, "n_diff": n_diff},
                        index=pd.Index(data.worker_ids, name="worker"))
