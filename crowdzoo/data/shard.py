"""One rank's shard of a pairs CSV (or of an annotations CSV, :func:`read_links_shard`), for a
distributed fit: no rank holds every label.

Two passes over the file in chunks of ``chunksize`` rows, so memory is O(chunk + items + users +
this rank's rows), never O(P):

1. the id columns alone: the number of data rows and, where no table names them, every item id (and
   user id) in the file — the sorted ids :meth:`~crowdzoo.PairwiseData.from_frame` would give the
   whole file, so that every rank numbers items and users alike;
2. the rows of this rank, a contiguous 1/R of the file's data rows, built with
   :meth:`~crowdzoo.PairwiseData.from_frame` against those global ids (same validation, same ties).

The ranks' label counts (ties dropped or doubled change them) are then gathered so that each shard
knows its place: ``label_range = (lo, hi, P)``, labels lo..hi-1 of the whole file's P, in the file's
order — the labels a single process reading the whole file would hold, and the order its mini-batch
indices refer to. Errors name the file's data row (0-based, header excluded) as the row's index.
"""
from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataError
from ..process_group import rank_and_world


def _chunks(path, sep, chunksize, usecols=None):
    try:
        yield from pd.read_csv(path, sep=sep, chunksize=chunksize, usecols=usecols)
    except pd.errors.EmptyDataError:
        raise DataError(f"path: {path} has no header row and no data", arg="path") from None
    except ValueError as err:  # usecols naming a column the file lacks
        raise DataError(f"path: {path}: {err}", arg="path") from None


def _in_file(err: DataError, path, rank: int, lo: int, hi: int) -> DataError:
    """An error of ``from_frame`` on rank ``rank``'s rows lo..hi-1 of the file, its row counted in the
    file's data rows (0-based, header excluded); its argument (a column's) and problem kept."""
    return DataError(f"{path}, rank {rank}'s data rows {lo}..{hi - 1} (index = the file's data row): {err}",
                     arg=err.arg, row=None if err.row is None else lo + err.row, ids=err.ids,
                     problem=err.problem)


def _sorted(ids, hint: str = "items= (and users=) tables that name them") -> pd.Index:
    try:
        return pd.Index(sorted(ids))
    except TypeError:
        raise DataError("read_shard: ids of mixed types cannot be ordered the same way on every rank; pass "
                        f"{hint}", arg="read_shard") from None


def _gather_counts(n: int, rank: int, world: int) -> list[int]:
    """Every rank's label count, by an all-gather (a single process: [n])."""
    if world == 1:
        return [n]
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise DataError(f"world: {world} ranks but no torch.distributed process group; read a shard inside "
                        "the torchrun launch (rank and world then default to the launch's)", arg="world")
    out = [torch.zeros(1, dtype=torch.long) for _ in range(world)]
    dist.all_gather(out, torch.tensor([n], dtype=torch.long))
    return [int(t) for t in out]


def rank_world(rank: int | None, world: int | None) -> tuple[int, int]:
    """``rank``/``world`` as given, or the torch.distributed process group's (initialised from
    torchrun's environment when needed), checked."""
    if rank is None or world is None:
        rank, world = rank_and_world()
    if not (0 <= rank < world):
        raise DataError(f"rank: expected 0 <= rank < world = {world}, got {rank}", arg="rank")
    return rank, world


def _file(path) -> Path:
    p = Path(path)
    if not p.is_file():
        raise DataError(f"path: file not found: {path}", arg="path")
    return p


def _rows_of(p: Path, sep: str, chunksize: int, lo_row: int, hi_row: int) -> pd.DataFrame:
    """Data rows lo_row..hi_row-1 of the CSV, indexed by their row in the file (pass 2)."""
    parts, start = [], 0
    for chunk in _chunks(p, sep, chunksize):
        end = start + len(chunk)
        if end > lo_row and start < hi_row:
            part = chunk.iloc[max(lo_row - start, 0):hi_row - start]
            parts.append(part.set_axis(pd.RangeIndex(max(lo_row, start), min(hi_row, end)), axis=0))
        start = end
        if start >= hi_row:
            break
    return pd.concat(parts) if parts else next(_chunks(p, sep, 1)).iloc[:0]


def read_links_shard(cls, path, O, i: str = "i", j: str = "j", same: str = "same",
                     worker: str | None = "worker", item_ids=None, labels=None, worker_ids=None,
                     sep: str = ",", rank: int | None = None, world: int | None = None,
                     chunksize: int = 1_000_000):
    """Rank ``rank`` of ``world``'s share of the annotations CSV at ``path`` (one row per annotation),
    as a :class:`~crowdzoo.LinkData` with ``annotation_range`` = (lo, hi, A): data rows lo = A·r/R to
    hi − 1 = A·(r+1)/R − 1 of the file's A, in the file's order. Two passes in chunks, as for pairs:
    the first counts the rows and, without ``worker_ids``, collects every worker id in the file (the
    sorted ids :meth:`~crowdzoo.LinkData.from_frame` would give the whole file, so that every rank
    numbers workers alike); the second builds this rank's rows with ``from_frame`` (the same checks;
    errors name the file's data row). ``O`` (every item's observations), ``item_ids`` and ``labels``
    as for ``from_frame``: items are not sharded. ``rank``/``world`` default to the torchrun launch's.
    ``cls``: :class:`~crowdzoo.LinkData`, whose :meth:`~crowdzoo.LinkData.read_shard` calls this (passed
    in, so that this module, below the data classes, imports none of them)."""
    p = _file(path)
    rank, world = rank_world(rank, world)
    n_rows, seen = 0, set()
    cols = [worker] if worker is not None and worker_ids is None else [i]
    for chunk in _chunks(p, sep, chunksize, usecols=cols):
        n_rows += len(chunk)
        if cols == [worker]:
            seen.update(pd.unique(chunk[worker].to_numpy()))
    if worker is not None and worker_ids is None:
        worker_ids = _sorted((x for x in seen if not pd.isna(x)), "worker_ids=").to_numpy()
    lo, hi = n_rows * rank // world, n_rows * (rank + 1) // world
    df = _rows_of(p, sep, chunksize, lo, hi)
    try:
        with warnings.catch_warnings():
            if n_rows:  # an empty share of a file that has annotations is no mistake of the user's
                warnings.filterwarnings("ignore", "df: no annotations")
            data = cls.from_frame(df, O, i=i, j=j, same=same, worker=worker, item_ids=item_ids,
                                       labels=labels, worker_ids=worker_ids)
    except DataError as err:
        raise _in_file(err, path, rank, lo, hi) from None
    return dataclasses.replace(data, annotation_range=(lo, hi, n_rows))


def read_shard(cls, path, items: pd.DataFrame | None = None, users: pd.DataFrame | None = None,
               a: str = "a", b: str = "b", y: str | None = "y", user: str | None = None,
               tie: str | None = None, ties: str = "error", weight: str | None = None, sep: str = ",",
               rank: int | None = None, world: int | None = None, chunksize: int = 1_000_000):
    """Rank ``rank`` of ``world``'s share of the pairs CSV at ``path`` (module docstring); the other
    arguments as for :meth:`~crowdzoo.PairwiseData.from_frame`, ``items``/``users`` the tables
    indexed by id. ``rank``/``world`` default to the torch.distributed process group's (initialised
    from torchrun's environment when needed); a read outside a
    launch must have ``world=1`` (the whole file). Items (users) are every id in the file's id
    columns, tie rows included, when no table names them. ``cls``: :class:`~crowdzoo.PairwiseData`,
    whose :meth:`~crowdzoo.PairwiseData.read_shard` calls this (passed in, so that this module, below
    the data classes, imports none of them)."""
    p = _file(path)
    rank, world = rank_world(rank, world)
    # pass 1: count the rows; the ids no table names
    id_cols = [c for c in (a, b) if items is None] + ([user] if user and users is None else [])
    n_rows, item_ids, user_ids = 0, set(), set()
    for chunk in _chunks(p, sep, chunksize, usecols=id_cols or [a]):
        n_rows += len(chunk)
        if items is None:
            item_ids.update(pd.unique(chunk[[a, b]].to_numpy().ravel()))
        if user and users is None:
            user_ids.update(pd.unique(chunk[user].to_numpy()))
    if n_rows < world:
        raise DataError(f"path: {path} has {n_rows} data rows for {world} ranks (each needs at least one)",
                        arg="path")
    if items is None:
        items = pd.DataFrame(index=_sorted(x for x in item_ids if not pd.isna(x)))
    kw = dict(a=a, b=b, y=y, tie=tie, ties=ties, weight=weight)
    if user:
        kw.update(user=user, users=users if users is not None else
                  pd.DataFrame(index=_sorted(x for x in user_ids if not pd.isna(x))))
    # pass 2: this rank's rows, indexed by their row in the file
    lo_row, hi_row = n_rows * rank // world, n_rows * (rank + 1) // world
    df = _rows_of(p, sep, chunksize, lo_row, hi_row)
    try:
        data = cls.from_frame(df, items, **kw)
    except DataError as err:
        raise _in_file(err, path, rank, lo_row, hi_row) from None
    counts = _gather_counts(data.n_pairs, rank, world)
    lo = sum(counts[:rank])
    if user and users is None:  # no user table: users carry no features, as from_frame would give them
        data = dataclasses.replace(data, user_features=None)
    return dataclasses.replace(data, label_range=(lo, lo + data.n_pairs, int(np.sum(counts))),
                               source_rows=data.source_rows + lo_row)  # the file's data rows
