"""Kamishima's Sushi preference data (Kamishima 2003), read from the user's own copy.

The data (http://www.kamishima.net/sushi/) may not be redistributed, so crowdzoo ships none of it:
:func:`load_sushi` reads the four files from a directory the user gives, and
:func:`write_sushi_fixture` writes a small synthetic stand-in in the same formats for tests and
demos. Formats (Kamishima's README):

* ``sushi3a.5000.10.order`` / ``sushi3b.5000.10.order``: a header line ``<n_items> 1``, then one
  line per user ``0 10 i_1 … i_10`` — the user's 10 items, most preferred first. Set A numbers
  its 10 items 0–9 on its own; they are master ids 0, 1, 2, 3, 4, 6, 7, 8, 26, 29 of
  ``sushi3.idata`` (``SET_A_ITEMS``). Set B uses the master ids 0–99.
* ``sushi3.idata``: tab-separated, one line per item: id, name, style, major group, minor group,
  oiliness, eating frequency, normalised price, selling frequency (``ITEM_COLUMNS``).
* ``sushi3.udata``: tab-separated, one line per user: id, gender, age group, time to fill in the
  questionnaire, prefecture / region / east-west until age 15, the same three now, and whether
  the prefecture changed (``USER_COLUMNS``).

Features are the numeric columns as they are (the authors' code does the same); the length-scale
heuristic of Eq. 26 puts them on one scale. Pairs come from each user's ranking: all 45 pairs of
their 10 items, each shown in a random order with y = 1 when the first is preferred (§5.2).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataError
from .pairwise import PairwiseData

SET_A_ITEMS = np.array([0, 1, 2, 3, 4, 6, 7, 8, 26, 29])
ITEM_COLUMNS = ("style", "major_group", "minor_group", "oiliness", "eating_frequency", "price",
                "selling_frequency")
USER_COLUMNS = ("gender", "age", "fill_time", "prefecture_until_15", "region_until_15",
                "east_west_until_15", "prefecture_now", "region_now", "east_west_now", "moved")
FILES = {"a": "sushi3a.5000.10.order", "b": "sushi3b.5000.10.order", "items": "sushi3.idata",
         "users": "sushi3.udata"}


@dataclass(frozen=True)
class Sushi:
    """One Sushi set: ``orders`` (U, 10) master item ids per user, most preferred first (row u is
    user ``users.index[u]``); ``items`` (100 rows) and ``users`` (U rows) feature tables indexed by
    id, names in ``ITEM_COLUMNS`` and ``USER_COLUMNS``."""

    orders: np.ndarray
    items: pd.DataFrame
    users: pd.DataFrame


def _file(data_dir, key) -> Path:
    path = Path(data_dir) / FILES[key]
    if not path.is_file():
        raise DataError(f"data_dir: {path} not found. The Sushi data is not redistributable: download "
                        "sushi3-2016.zip from http://www.kamishima.net/sushi/, unzip it and pass the "
                        "folder that holds the four files (or write_sushi_fixture() for a synthetic one)",
                        arg="data_dir")
    return path


def read_order(path) -> np.ndarray:
    """An ``.order`` file → (U, 10) int array of the file's item ids, most preferred first."""
    path = Path(path)
    lines = path.read_text().splitlines()
    if not lines:
        raise DataError(f"{path}: empty file", arg="path")
    try:
        n_items = int(lines[0].split()[0])
    except (ValueError, IndexError):
        raise DataError(f"{path}: line 1: expected the header '<n_items> 1', got {lines[0]!r}",
                        arg="path") from None
    rows = [ln.split() for ln in lines[1:] if ln.strip()]
    for r, f in enumerate(rows, start=2):
        if len(f) != 12 or f[1] != "10":
            raise DataError(f"{path}: line {r}: expected '0 10' and 10 item ids (12 fields), got {len(f)} "
                            f"fields: {' '.join(f)!r}", arg="path")
    try:
        orders = np.array([[int(x) for x in f[2:]] for f in rows], dtype=np.int64)
    except ValueError as e:
        raise DataError(f"{path}: non-integer item id ({e})", arg="path") from None
    bad = np.argwhere((orders < 0) | (orders >= n_items))
    if bad.size:
        r, k = bad[0]
        raise DataError(f"{path}: line {r + 2}: item id {orders[r, k]} is outside 0..{n_items - 1}",
                        arg="path")
    repeated = np.flatnonzero((np.diff(np.sort(orders, axis=1), axis=1) == 0).any(axis=1))
    if repeated.size:
        raise DataError(f"{path}: line {repeated[0] + 2}: an item appears twice in one ranking", arg="path")
    return orders


def _table(path, columns, what) -> pd.DataFrame:
    df = pd.read_csv(path, sep="\t", header=None)
    n_num = len(columns)
    if df.shape[1] != n_num + 1 + (what == "items"):
        raise DataError(f"{path}: expected {n_num + 1 + (what == 'items')} tab-separated columns per "
                        f"line, found {df.shape[1]}", arg="path")
    ids = df.iloc[:, 0]
    num = df.iloc[:, -n_num:].apply(pd.to_numeric, errors="coerce")
    bad = np.argwhere(~np.isfinite(num.to_numpy(np.float64)))
    if bad.size:
        r, k = bad[0]
        raise DataError(f"{path}: line {r + 1}: column {columns[k]!r} is not a finite number "
                        f"({df.iloc[r, k + df.shape[1] - n_num]!r})", arg="path")
    out = pd.DataFrame(num.to_numpy(np.float64), columns=list(columns), index=ids.to_numpy())
    out.index.name = "id"
    if what == "items":
        out.insert(0, "name", df.iloc[:, 1].to_numpy())
    return out


def load_sushi(data_dir, variant: str = "a") -> Sushi:
    """Read Sushi set ``variant`` ("a": 10 items, "b": 100) from ``data_dir``; Set A's item ids
    are mapped to the master ids of ``sushi3.idata``."""
    if variant not in ("a", "b"):
        raise DataError(f"variant: expected 'a' or 'b', got {variant!r}", arg="variant")
    orders = read_order(_file(data_dir, variant))
    if variant == "a":
        if orders.max() >= len(SET_A_ITEMS):
            raise DataError(f"{FILES['a']}: Set A has 10 items (ids 0..9), found id {orders.max()}",
                            arg="data_dir")
        orders = SET_A_ITEMS[orders]
    items = _table(_file(data_dir, "items"), ITEM_COLUMNS, "items")
    users = _table(_file(data_dir, "users"), USER_COLUMNS, "users")
    missing = np.setdiff1d(np.unique(orders), items.index.to_numpy())
    if missing.size:
        raise DataError(f"{FILES['items']}: item id {missing[0]} of the rankings has no features",
                        arg="data_dir")
    if len(users) != len(orders):
        raise DataError(f"{FILES['users']}: {len(users)} users for {len(orders)} rankings "
                        f"in {FILES[variant]} (one line per user, in the same order)", arg="data_dir")
    return Sushi(orders=orders, items=items, users=users)


def sample_pairs(sushi: Sushi, n_users: int | None, n_train: int, n_test: int, seed: int = 0,
                 user_features: bool = True):
    """The §5.2 protocol: ``n_users`` users at random (None: all), then for each of them
    ``n_train`` training and ``n_test`` test pairs drawn without replacement from the 45 pairs of
    their ranking. Returns (train, test, orders) — two :class:`PairwiseData` over every item of
    the set and the chosen users, and those users' rankings (for Kendall τ)."""
    if n_train + n_test > 45:
        raise DataError(f"n_train + n_test: a ranking of 10 items has 45 pairs, asked for {n_train + n_test}",
                        arg="n_test")
    rng = np.random.default_rng(seed)
    U = len(sushi.orders)
    chosen = np.sort(rng.choice(U, size=U if n_users is None else min(n_users, U), replace=False))
    orders = sushi.orders[chosen]
    hi, lo = np.triu_indices(10, k=1)  # position hi ranks above position lo
    pick = np.argsort(rng.uniform(size=(len(chosen), 45)), axis=1)[:, : n_train + n_test]
    better = np.take_along_axis(orders[:, hi], pick, axis=1)
    worse = np.take_along_axis(orders[:, lo], pick, axis=1)
    flip = rng.uniform(size=pick.shape) < 0.5
    a, b = np.where(flip, worse, better), np.where(flip, better, worse)
    y = (~flip).astype(np.float64)
    item_ids = np.unique(sushi.orders)
    X = sushi.items.loc[item_ids, list(ITEM_COLUMNS)].to_numpy()
    to_pos = partial(np.searchsorted, item_ids)  # item_ids sorted (np.unique): id → row
    U_feat = sushi.users.iloc[chosen].to_numpy() if user_features else None
    user_ids = sushi.users.index.to_numpy()[chosen]
    j = np.repeat(np.arange(len(chosen))[:, None], pick.shape[1], axis=1)

    def part(cols):
        return PairwiseData.from_arrays(to_pos(a[:, cols]).ravel(), to_pos(b[:, cols]).ravel(),
                                        y[:, cols].ravel(), X, users=j[:, cols].ravel(),
                                        user_features=U_feat, item_ids=item_ids, user_ids=user_ids)

    return part(slice(0, n_train)), part(slice(n_train, None)), orders


def write_sushi_fixture(out_dir, n_users: int = 200, seed: int = 0) -> Path:
    """Write a synthetic Sushi set in Kamishima's four formats to ``out_dir``: 100 items with
    features drawn like the real ones, ``n_users`` users, and rankings from a utility with a
    shared part (a smooth function of the item features) and a personal part that depends on the
    user's east/west and age. Not the real data — for tests, demos and trying the comparisons."""
    rng = np.random.default_rng(seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n_items = 100
    items = pd.DataFrame({
        "id": np.arange(n_items), "name": [f"neta{i}" for i in range(n_items)],
        "style": rng.integers(0, 2, n_items), "major_group": rng.integers(0, 2, n_items),
        "minor_group": rng.integers(0, 12, n_items), "oiliness": rng.uniform(0, 4, n_items),
        "eating_frequency": rng.uniform(0, 3, n_items), "price": rng.uniform(1, 5, n_items),
        "selling_frequency": rng.uniform(0, 1, n_items)})
    users = pd.DataFrame({
        "id": np.arange(n_users), "gender": rng.integers(0, 2, n_users), "age": rng.integers(0, 6, n_users),
        "fill_time": rng.integers(100, 1000, n_users), "prefecture_until_15": rng.integers(0, 48, n_users),
        "region_until_15": rng.integers(0, 12, n_users), "east_west_until_15": rng.integers(0, 2, n_users),
        "prefecture_now": rng.integers(0, 48, n_users), "region_now": rng.integers(0, 12, n_users),
        "east_west_now": rng.integers(0, 2, n_users), "moved": rng.integers(0, 2, n_users)})
    oil, freq, price = (items[c].to_numpy() for c in ("oiliness", "eating_frequency", "price"))
    shared = np.sin(oil) + 0.8 * freq - 0.3 * price
    taste = np.cos(1.5 * oil) + items["style"].to_numpy()
    lean = (2 * users["east_west_now"].to_numpy() - 1) + 0.3 * (users["age"].to_numpy() - 2.5)
    F = shared[:, None] + taste[:, None] * lean[None, :] + 0.5 * rng.standard_normal((n_items, n_users))

    def ranking(cands):  # (U, 10) candidate ids → sorted by the user's utility, best first
        util = np.take_along_axis(F.T, cands, axis=1)
        return np.take_along_axis(cands, np.argsort(-util, axis=1), axis=1)

    set_a = ranking(np.broadcast_to(SET_A_ITEMS, (n_users, 10)).copy())
    a_local = np.searchsorted(SET_A_ITEMS, set_a)
    set_b = ranking(np.argsort(rng.uniform(size=(n_users, n_items)), axis=1)[:, :10])
    for key, rows, n in (("a", a_local, 10), ("b", set_b, n_items)):
        body = "\n".join("0 10 " + " ".join(map(str, r)) for r in rows)
        (out / FILES[key]).write_text(f"{n} 1\n{body}\n")
    items.to_csv(out / FILES["items"], sep="\t", header=False, index=False)
    users.to_csv(out / FILES["users"], sep="\t", header=False, index=False)
    return out
