"""`ChoiceData`: who chose which item of a set as best (and, best–worst, which as worst).

One row per choice: a set of k ≥ 2 distinct items (k may vary from row to row), the item chosen as
best and optionally the item rejected as worst (best–worst scaling, MaxDiff), and optionally the user
who chose. Sets are held padded, ``sets`` (R, k_max) of item positions with −1 after each row's
last member, so that every likelihood is vectorised over rows and slots
(:mod:`crowdzoo.gp.choice`); ``best`` and ``worst`` are slots of that array.

``from_frame`` reads the **long** layout of choice modelling (one line per (choice, item), as R's
mlogit and Apollo read it): a column naming the choice, one naming the item, a 0/1 column marking
the best and, for best–worst data, one marking the worst. Errors name the argument or column, the row
and the problem; the caller's arrays and frames are copied, never changed.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..errors import DataError, _show
from .pairwise import PairwiseData, _feature_warnings, _features, _flags, _int_index


def _padded(sets) -> np.ndarray:
    """A 2-D array of item positions (−1 padding allowed after a row's members) or a sequence of
    sequences (ragged) as one (R, k_max) int64 array padded with −1."""
    if isinstance(sets, np.ndarray) and sets.ndim == 2:
        arr = sets
    else:
        try:
            rows = [np.asarray(s).reshape(-1) for s in sets]
        except TypeError:
            raise DataError(f"sets: expected a 2-D array or a list of sets of item indices, got "
                            f"{type(sets).__name__}", arg="sets") from None
        if not rows:
            raise DataError("sets: empty data (no choices)", arg="sets", problem="empty data (no choices)")
        k = np.array([r.size for r in rows])
        flat = np.concatenate(rows) if k.sum() else np.zeros(0)
        dtype = object if flat.dtype == object else flat.dtype
        arr = np.full((len(rows), max(int(k.max()), 1)), -1, dtype=dtype)
        arr[np.arange(arr.shape[1]) < k[:, None]] = flat
    if arr.shape[0] == 0:
        raise DataError("sets: empty data (no choices)", arg="sets", problem="empty data (no choices)")
    return np.asarray(arr)


def _slot(name: str, items: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """The slot of each row's ``items`` (R,) in ``sets``; a DataError where it is not a member."""
    hit = sets == items[:, None]
    bad = np.flatnonzero(~hit.any(1) & (items >= 0))  # −1: no item (a row without a worst)
    if bad.size:
        r = bad[0]
        problem = (f"item {items[r]} is not in its set {sets[r][sets[r] >= 0].tolist()} ({bad.size} row(s) "
                   "affected)")
        raise DataError(f"{name}: row {r}: {problem}", arg=name, row=int(r), problem=problem)
    return np.where(items >= 0, hit.argmax(1), -1)


@dataclass(frozen=True)
class ChoiceData:
    """Choices of one item from a set (and, best–worst, of the worst), with item (and user) features.

    Attributes
    ----------
    sets : (R, k_max) int64 — item positions of each row's set, −1 after its last member.
    best : (R,) int64 — the slot (column of ``sets``) of the item chosen as best.
    worst : (R,) int64 or None — the slot of the item rejected as worst, −1 where a row has none.
    item_features : (N, D) float64; users : (R,) int64 or None; user_features : (U, E) or None.
    item_ids, user_ids : the caller's ids; row_ids : (R,) the caller's choice ids (``from_frame``).
    source_rows : (R,) int64 or None — the frame line (position) of each choice's first member.
    """

    sets: np.ndarray
    best: np.ndarray
    item_features: np.ndarray
    worst: np.ndarray | None = None
    users: np.ndarray | None = None
    user_features: np.ndarray | None = None
    item_ids: np.ndarray = field(default=None)
    user_ids: np.ndarray | None = None
    row_ids: np.ndarray | None = None
    source_rows: np.ndarray | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(cls, sets, chosen, item_features, users=None, worst=None, user_features=None,
                    item_ids=None, user_ids=None) -> ChoiceData:
        """Build from item positions: ``sets`` a list of sets (each a sequence of ≥ 2 distinct rows of
        ``item_features``; lengths may differ) or a 2-D array (−1 pads a shorter set), ``chosen`` (R,)
        the item chosen as best of each set, ``worst`` (R,) or None the item rejected as worst (−1: none
        in that row), ``users`` (R,) or None the user of each choice."""
        X = _features("item_features", item_features, None, "item")
        N = X.shape[0]
        raw = _padded(sets)
        R, K = raw.shape
        pad = pd.isna(raw) | (raw == -1) if raw.dtype == object else raw == -1
        sets = np.where(pad, 0, raw)
        sets = _int_index("sets", sets.reshape(-1), N).reshape(R, K)
        sets = np.where(pad, -1, sets)
        mask = sets >= 0
        holes = np.flatnonzero((~mask[:, :-1] & mask[:, 1:]).any(1))
        if holes.size:
            r = holes[0]
            raise DataError(f"sets: row {r}: padding (−1) before a member; put a set's items first",
                            arg="sets", row=int(r), problem="padding (−1) before a member")
        k = mask.sum(1)
        small = np.flatnonzero(k < 2)
        if small.size:
            r = small[0]
            problem = f"a set of {k[r]} item(s); a choice needs at least 2 ({small.size} row(s) affected)"
            raise DataError(f"sets: row {r}: {problem}", arg="sets", row=int(r), problem=problem)
        srt = np.sort(np.where(mask, sets, -1 - np.arange(K)), axis=1)  # padding never repeats
        dup = np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(1))
        if dup.size:
            r = dup[0]
            item = srt[r, 1:][srt[r, 1:] == srt[r, :-1]][0]
            problem = f"item {item} appears more than once in the set ({dup.size} row(s) affected)"
            raise DataError(f"sets: row {r}: {problem}", arg="sets", row=int(r), problem=problem)
        lengths = {"sets": R, "chosen": np.size(chosen)}
        if worst is not None:
            lengths["worst"] = np.size(worst)
        if users is not None:
            lengths["users"] = np.size(users)
        odd = [n for n, v in lengths.items() if v != R]
        if odd:
            raise DataError(f"mismatched lengths: {lengths}; one entry per choice", arg=odd[0],
                            problem=f"{lengths[odd[0]]} rows where the sets have {R}")
        best = _slot("chosen", _int_index("chosen", chosen, N), sets)
        w = None
        if worst is not None:
            w_items = np.asarray(worst)
            none = w_items == -1
            w_items = np.where(none, -1, _int_index("worst", np.where(none, 0, w_items), N))
            w = _slot("worst", w_items, sets)
            same = np.flatnonzero(w == best)
            if same.size:
                r = same[0]
                problem = (f"item {sets[r, best[r]]} is both the best and the worst ({same.size} row(s) "
                           "affected)")
                raise DataError(f"worst: row {r}: {problem}", arg="worst", row=int(r), problem=problem)
            if not (w >= 0).any():
                w = None
        u, U_feat = None, None
        if user_features is not None:
            U_feat = _features("user_features", user_features, None, "user")
        if users is not None:
            seen = max(int(np.max(users)) + 1, 0 if user_ids is None else len(user_ids))
            n_users = U_feat.shape[0] if U_feat is not None else seen
            u = _int_index("users", users, n_users)
            user_ids = np.arange(n_users) if user_ids is None else np.asarray(user_ids).copy()
        elif U_feat is not None:
            raise DataError("user_features given without users: pass users= (one user index per choice)",
                            arg="user_features", problem="a table of users but no user per choice")
        item_ids = np.arange(N) if item_ids is None else np.asarray(item_ids).copy()
        if len(item_ids) != N:
            raise DataError(f"item_ids: {len(item_ids)} ids for {N} feature rows", arg="item_ids")
        cols = list(item_features.columns) if isinstance(item_features, pd.DataFrame) else None
        _feature_warnings("item_features", X, cols, item_ids, "item", rows_too=True)
        return cls(sets=sets.astype(np.int64), best=best.astype(np.int64), item_features=X,
                   worst=None if w is None else w.astype(np.int64), users=u, user_features=U_feat,
                   item_ids=item_ids, user_ids=user_ids)

    @classmethod
    def from_frame(cls, df: pd.DataFrame, items: pd.DataFrame | None = None, choice: str = "choice",
                   item: str = "item", chosen: str = "chosen", worst: str | None = None,
                   user: str | None = None, users: pd.DataFrame | None = None) -> ChoiceData:
        """Build from the long layout: one line per (choice, item offered).

        ``df[choice]`` names the choice a line belongs to (its lines need not be adjacent; choices keep
        the order of their first line), ``df[item]`` the item offered, ``df[chosen]`` is 1 (true, yes)
        on the line of the item chosen as best and 0 on the others; ``df[worst]`` (optional) is 1 on
        the line of the item rejected as worst (best–worst data; a choice may have none). ``user``
        (optional) names the user column, constant within a choice; ``users`` a table of user
        features indexed by user id. ``items``: a table indexed by item id, every column a numeric
        feature (None: the ids seen, sorted, without features).

        Errors name the column, the line of ``df`` (``row`` its position) and the problem: a choice
        without a best or with two, the same line best and worst, an item offered twice in a choice,
        a choice of fewer than 2 items, a user that changes within a choice."""
        if not isinstance(df, pd.DataFrame):
            raise DataError(f"df: expected a pandas DataFrame, got {type(df).__name__}", arg="df")
        named = {"choice": choice, "item": item, "chosen": chosen, "worst": worst, "user": user}
        for arg, col in named.items():
            if col is not None and col not in df.columns:
                raise DataError(f"{arg}: column {col!r} not found in df (columns: {list(df.columns)})",
                                arg=arg, problem=f"column {col!r} not found (columns: {list(df.columns)})")
        if len(df) == 0:
            raise DataError("df: empty data (no choices)", arg="df")

        def where(r):
            return f"row {r} (index {_show(df.index[r])})"

        for arg, col in (("choice", choice), ("item", item)):
            miss = np.flatnonzero(pd.isna(df[col].to_numpy()))
            if miss.size:
                r = int(miss[0])
                raise DataError(f"column {col!r}, {where(r)}: missing {arg} id", arg=arg, row=r,
                                problem=f"missing {arg} id")
        codes, row_ids = pd.factorize(df[choice].to_numpy())  # choices in order of first line
        order = np.argsort(codes, kind="stable")
        R = len(row_ids)
        k = np.bincount(codes, minlength=R)
        first = order[np.r_[0, np.cumsum(k)[:-1]]]  # the frame line of each choice's first member
        small = np.flatnonzero(k < 2)
        if small.size:
            r = int(first[small[0]])
            c = small[0]
            raise DataError(f"column {choice!r}, {where(r)}: choice {_show(row_ids[c])} offers {k[c]} "
                            "item(s); a choice needs at least 2", arg="choice", row=r,
                            problem=f"choice {_show(row_ids[small[0]])} offers fewer than 2 items")
        slot = np.empty(len(df), dtype=np.int64)
        slot[order] = np.arange(len(df)) - np.repeat(np.r_[0, np.cumsum(k)[:-1]], k)
        is_best = _flags(chosen, df[chosen], where, arg="chosen")
        n_best = np.bincount(codes, weights=is_best, minlength=R)
        bad = np.flatnonzero(n_best != 1)
        if bad.size:
            c = bad[0]
            r = int(first[c])
            problem = f"choice {_show(row_ids[c])} marks {int(n_best[c])} items as chosen; mark exactly one"
            raise DataError(f"column {chosen!r}, {where(r)}: {problem}", arg="chosen", row=r, problem=problem)
        w = None
        if worst is not None:
            is_worst = _flags(worst, df[worst], where, arg="worst")
            both = np.flatnonzero(is_worst & is_best)
            if both.size:
                r = int(both[0])
                problem = "the same item is marked chosen (best) and worst"
                raise DataError(f"column {worst!r}, {where(r)}: {problem}", arg="worst", row=r,
                                problem=problem)
            n_worst = np.bincount(codes, weights=is_worst, minlength=R)
            bad = np.flatnonzero(n_worst > 1)
            if bad.size:
                c = bad[0]
                r = int(first[c])
                problem = (f"choice {_show(row_ids[c])} marks {int(n_worst[c])} items as worst; mark at most "
                           "one")
                raise DataError(f"column {worst!r}, {where(r)}: {problem}", arg="worst", row=r,
                                problem=problem)
            w = np.full(R, -1, dtype=np.int64)
            w[codes[is_worst]] = slot[is_worst]
        if items is None:
            seen = pd.unique(df[item].to_numpy())
            try:
                item_index = pd.Index(sorted(seen))
            except TypeError:
                item_index = pd.Index(seen)
            features = np.zeros((len(item_index), 0))
        else:
            item_index, features = pd.Index(items.index), items
        pos = item_index.get_indexer(df[item].to_numpy())
        missing = np.flatnonzero(pos < 0)
        if missing.size:
            r = int(missing[0])
            problem = (f"item id {_show(df[item].iloc[r])} not found in items table ({missing.size} row(s) "
                       "affected)")
            raise DataError(f"column {item!r}, {where(r)}: {problem}", arg="item", row=r, problem=problem)
        sets = np.full((R, int(k.max())), -1, dtype=np.int64)
        sets[codes, slot] = pos
        srt = np.sort(np.where(sets >= 0, sets, -1 - np.arange(sets.shape[1])), axis=1)
        dup = np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(1))
        if dup.size:
            c = dup[0]
            r = int(first[c])
            problem = f"choice {_show(row_ids[c])} offers an item more than once"
            raise DataError(f"column {item!r}, {where(r)}: {problem}", arg="item", row=r, problem=problem)
        best = np.zeros(R, dtype=np.int64)
        best[codes[is_best]] = slot[is_best]
        kw = {}
        if user is not None:
            vals = df[user].to_numpy()
            if pd.isna(vals).any():
                r = int(np.flatnonzero(pd.isna(vals))[0])
                raise DataError(f"column {user!r}, {where(r)}: missing user id", arg="user", row=r,
                                problem="missing user id")
            ucodes, uniq = pd.factorize(vals, sort=True) if users is None else (None, None)
            if users is not None:
                ucodes = pd.Index(users.index).get_indexer(vals)
                miss = np.flatnonzero(ucodes < 0)
                if miss.size:
                    r = int(miss[0])
                    problem = f"user id {_show(vals[r])} not found in users table"
                    raise DataError(f"column {user!r}, {where(r)}: {problem}", arg="user", row=r,
                                    problem=problem)
                uniq = users.index.to_numpy()
                kw["user_features"] = users
            row_user = ucodes[first]
            changes = np.flatnonzero(ucodes != row_user[codes])
            if changes.size:
                r = int(changes[0])
                raise DataError(f"column {user!r}, {where(r)}: the user changes within choice "
                                f"{_show(df[choice].iloc[r])}", arg="user", row=r,
                                problem="the user changes within a choice")
            kw.update(users=row_user, user_ids=np.asarray(uniq))
        data = cls.from_arrays(sets, sets[np.arange(R), best], features, worst=None if w is None else
                               np.where(w >= 0, sets[np.arange(R), w.clip(0)], -1),
                               item_ids=item_index.to_numpy(), **kw)
        return replace(data, row_ids=np.asarray(row_ids), source_rows=first.astype(np.int64))

    # ------------------------------------------------------------------ views
    @property
    def mask(self) -> np.ndarray:
        """(R, k_max) bool: the slots that hold an item."""
        return self.sets >= 0

    @property
    def n_rows(self) -> int:
        return self.sets.shape[0]

    @property
    def n_items(self) -> int:
        return self.item_features.shape[0]

    @property
    def n_users(self) -> int:
        return 0 if self.user_ids is None else len(self.user_ids)

    @property
    def set_sizes(self) -> np.ndarray:
        return self.mask.sum(1)

    has_ties = False  # a choice has no tie outcome; what the pairwise routes' checks read

    @property
    def chosen_items(self) -> np.ndarray:
        """(R,) the item position chosen as best in each row."""
        return self.sets[np.arange(self.n_rows), self.best]

    def to_frame(self) -> pd.DataFrame:
        """The long layout of :meth:`from_frame`: columns choice, (user,) item, chosen (and worst)."""
        r, s = np.nonzero(self.mask)
        ids = np.arange(self.n_rows) if self.row_ids is None else self.row_ids
        out = {"choice": ids[r]}
        if self.users is not None:
            out["user"] = np.asarray(self.user_ids)[self.users[r]]
        out["item"] = np.asarray(self.item_ids)[self.sets[r, s]]
        out["chosen"] = (self.best[r] == s).astype(np.int64)
        if self.worst is not None:
            out["worst"] = (self.worst[r] == s).astype(np.int64)
        return pd.DataFrame(out)

    def subset(self, rows) -> ChoiceData:
        """The choices in ``rows`` (indices or a boolean mask); item and user tables kept whole."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        if rows.size == 0:
            raise DataError("subset: no rows selected", arg="rows", problem="no rows selected")
        keep = self.mask[rows].any(0)  # drop slots no kept row uses
        pick = lambda x: None if x is None else x[rows]  # noqa: E731
        return replace(self, sets=self.sets[rows][:, keep], best=self.best[rows],
                       worst=pick(self.worst), users=pick(self.users), row_ids=pick(self.row_ids),
                       source_rows=pick(self.source_rows))

    def rank_breaking(self) -> PairwiseData:
        """The choices broken into pairs (full rank-breaking of each row's partial order): the best beats
        every other member, and every other member beats the worst — k − 1 labels a best-only row,
        2k − 3 a best–worst row, each with the row's user. What a pairwise model fits when it cannot
        read choices; it counts one choice as that many independent labels."""
        R, K = self.sets.shape
        rows = np.repeat(np.arange(R)[:, None], K, 1)
        slots = np.repeat(np.arange(K)[None, :], R, 0)
        win = self.mask & (slots != self.best[:, None])
        a = [self.chosen_items[rows[win]]]
        b = [self.sets[win]]
        src = [rows[win]]
        if self.worst is not None:
            has = self.worst >= 0
            lose = win & has[:, None] & (slots != self.worst[:, None])
            worst_item = self.sets[np.arange(R), self.worst.clip(0)]
            a.append(self.sets[lose])
            b.append(worst_item[rows[lose]])
            src.append(rows[lose])
        a, b, src = np.concatenate(a), np.concatenate(b), np.concatenate(src)
        pairs = PairwiseData(a=a, b=b, y=np.ones(a.size), item_features=self.item_features,
                             users=None if self.users is None else self.users[src],
                             user_features=self.user_features, item_ids=self.item_ids, user_ids=self.user_ids,
                             source_rows=src)
        return pairs

    def __repr__(self) -> str:
        u = f", users={self.n_users}" if self.users is not None else ""
        bw = ", best-worst" if self.worst is not None else ""
        k = self.set_sizes
        return (f"ChoiceData(choices={self.n_rows}, items={self.n_items}, k={int(k.min())}"
                + (f"..{int(k.max())}" if k.max() > k.min() else "") + f"{bw}{u})")
