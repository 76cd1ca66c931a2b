"""Reading the user's CSV files: a table with a clear error for a missing, empty or unreadable file,
the columns the options name, feature tables (``--items``, ``--users``) with their yes/no and one-hot
columns, and the pairs of ``fit`` as :class:`~crowdzoo.PairwiseData` (one label per row, weighted by
``--weight-col`` where given, or counts per pair with ``--wins-col``, ``--losses-col`` and
``--ties-col``: :meth:`~crowdzoo.PairwiseData.from_counts`), whose errors come back in the command
line's words (:mod:`crowdzoo.cli.messages`). The user's files are only read.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from .. import zoo
from ..errors import DataError, _show
from .messages import FIT_ADVICE, cli_message, pairs_places


def _read_csv(path, flag: str, sep: str = ",", nrows: int | None = None) -> pd.DataFrame:
    """A CSV file, or a DataError naming ``flag`` (missing, empty, unreadable)."""
    p = Path(path)
    if not p.exists():
        raise DataError(f"{flag}: file not found: {path}")
    if not p.is_file():
        raise DataError(f"{flag}: {path} is not a file")
    if p.stat().st_size == 0:
        raise DataError(f"{flag}: {path} is empty (0 bytes); expected a CSV file with a header row")
    try:
        return pd.read_csv(p, sep=sep, nrows=nrows)
    except pd.errors.EmptyDataError:
        raise DataError(f"{flag}: {path} has no header row and no data (blank lines only)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError) as err:
        why = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise DataError(f"{flag}: {path} is not a readable CSV file with separator {sep!r} ({why}); check "
                        "the file, or set --sep") from None


def _need_columns(frame: pd.DataFrame, path, flag: str, wanted: dict, settable: bool = True) -> None:
    """Each column of ``wanted`` ({column: the option that names it}) is in ``frame``; ``settable``: the
    message may advise setting the option."""
    for col, option in wanted.items():
        if col not in frame.columns:
            advice = f"; set {option}" if settable else ""
            raise DataError(f"{flag}: column {col!r} ({option}) not found in {path} (columns: "
                            f"{list(frame.columns)}){advice}{_sep_hint(frame)}{_winner_hint(frame, option)}",
                            arg=flag)


def _sep_hint(frame: pd.DataFrame) -> str:
    """When a CSV read as one column holds another separator in its name, a hint to set --sep."""
    if len(frame.columns) == 1:
        found = [s for s in (";", "\t", "|", ",") if s in str(frame.columns[0])]
        if found:
            return f"; the file looks {found[0]!r}-separated: set --sep {found[0]!r}"
    return ""


#: column names that say which item of a pair won (a winner-first file needs no label column)
WINNERS, LOSERS = ("winner", "preferred", "chosen"), ("loser", "rejected", "other")


def _winner_hint(frame: pd.DataFrame, option: str) -> str:
    """When a pairs file's columns read as a winner and a loser and the pair's columns or its label are
    missing, the flags that read it as a winner-first file."""
    if option not in ("--a-col", "--b-col", "--y-col"):
        return ""
    named = {str(c).strip().lower(): c for c in frame.columns}
    win = next((named[w] for w in WINNERS if w in named), None)
    lose = next((named[w] for w in LOSERS if w in named), None)
    if win is None or lose is None:
        return ""
    return (f"; if each row's {win!r} is the preferred item (no label column), read the file with --a-col "
            f"{win} --b-col {lose} --winner-first")


def _names(value: str) -> list:
    return [c.strip() for c in value.split(",") if c.strip()]


@dataclasses.dataclass(frozen=True)
class Table:
    """A CSV table of features (``--items`` or ``--users``) and the flags that choose its columns."""

    flag: str
    what: str
    features: str
    one_hot: str


ITEMS = Table("--items", "item", "--features", "--one-hot")


USERS = Table("--users", "user", "--user-features", "--user-one-hot")


#: one-hot refuses a numeric column with more distinct values than this that are also more than half
#: the rows: a measurement (altitude, price), not a category
ONE_HOT_MAX = 10


ONE_HOT_HELP = (f"; a numeric column with more than {ONE_HOT_MAX} distinct values, distinct in more than "
                "half the rows, is a measurement and is refused (give it as a number)")


def _yes_no(col: pd.Series) -> pd.Series | None:
    """A column of yes/no (or true/false) words as 1.0/0.0 (missing stays missing); None otherwise."""
    from ..data.pairwise import FLAG_WORDS

    words = col.astype(str).str.strip().str.lower().where(col.notna())
    if not col.notna().any() or not words.dropna().isin(list(FLAG_WORDS)).all():
        return None
    return words.map(FLAG_WORDS)


def _one_hot(col: pd.Series, name: str, t: Table, ids) -> dict:
    """The dummy columns ``name=value`` of a categorical column; refused where a value is missing or
    the column looks like a measurement (:data:`ONE_HOT_MAX`)."""
    if col.isna().any():
        r = int(np.flatnonzero(col.isna())[0])
        raise DataError(f"{t.one_hot}: column {name!r} of {t.flag}, row {r} ({t.what} {_show(ids[r])}): "
                        f"missing value; give every {t.what} a category")
    distinct = col.nunique()
    if (pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)
            and distinct > ONE_HOT_MAX and distinct > len(col) / 2):
        raise DataError(f"{t.one_hot}: column {name!r} of {t.flag} is numeric with {distinct} distinct "
                        f"values in {len(col)} rows: a measurement, not a category (one-hot would make "
                        f"{distinct} columns, each marking about one {t.what}); give it as a number with "
                        f"{t.features} {name} (or leave it out of {t.one_hot}: without {t.features} every "
                        "column is a feature)")
    dummies = pd.get_dummies(col.astype(str), prefix=name, prefix_sep="=", dtype=float)
    return {c: dummies[c] for c in dummies.columns}


def _table_features(table: pd.DataFrame, path, t: Table, features: str | None,
                    one_hot: str | None) -> pd.DataFrame:
    """The feature columns of a table indexed by id: those listed in ``features`` (default: every
    column), the ``one_hot`` ones encoded as dummies, a yes/no column as 1/0; any other string
    column is refused, naming it and the flag that would take it."""
    cols = list(table.columns)
    chosen = _names(features) if features is not None else None
    encode = _names(one_hot) if one_hot else []
    for flag, names in ((t.features, chosen or []), (t.one_hot, encode)):
        for name in names:
            if name not in cols:
                other = USERS if t is ITEMS else ITEMS
                alt = other.features if flag == t.features else other.one_hot
                raise DataError(f"{flag}: column {name!r} not in {t.flag} {path} (its feature columns: "
                                f"{cols}); a column of {other.flag} goes to {alt}")
    chosen = cols if chosen is None else chosen + [c for c in encode if c not in chosen]
    out: dict = {}
    for name in chosen:
        col = table[name]
        if name in encode:
            out.update(_one_hot(col, name, t, table.index))
        elif pd.api.types.is_bool_dtype(col):
            out[name] = col.astype(float)
        elif pd.api.types.is_numeric_dtype(col):
            out[name] = col
        elif (flags := _yes_no(col)) is not None:
            if flags.isna().any():
                r = int(np.flatnonzero(flags.isna())[0])
                raise DataError(f"{t.flag}: column {name!r} (yes/no), row {r} ({t.what} "
                                f"{_show(table.index[r])}): missing value; give every {t.what} yes or no")
            out[name] = flags
        else:
            bad = np.flatnonzero(pd.to_numeric(col, errors="coerce").isna() & col.notna())
            r = int(bad[0]) if bad.size else 0
            numeric = [c for c in chosen if c != name and (pd.api.types.is_numeric_dtype(table[c])
                                                           or _yes_no(table[c]) is not None)]
            raise DataError(
                f"{t.flag}: column {cols.index(name)} ({name!r}) is not numeric (row {r}, {t.what} "
                f"{_show(table.index[r])}: {_show(col.iloc[r])}); to use it as a category, one-hot encode "
                f"it with {t.one_hot} {name}; or leave it out with {t.features} {','.join(numeric) or ''!r}")
    return pd.DataFrame(out, index=table.index)


#: the option that names each column of a pairs file, by the argument of ``PairwiseData.from_frame`` (and
#: of ``PairwiseData.from_counts`` for a file of counts)
PAIR_OPTIONS = {"a": "--a-col", "b": "--b-col", "y": "--y-col", "tie": "--tie-col", "user": "--user-col",
                "weight": "--weight-col", "wins": "--wins-col", "losses": "--losses-col",
                "tied": "--ties-col"}

#: the options of weighted rows and of counts per pair: {dest: flag}
WEIGHT_OPTIONS = {"weight_col": "--weight-col", "wins_col": "--wins-col", "losses_col": "--losses-col",
                  "ties_col": "--ties-col"}


def has_counts(args) -> bool:
    """Whether --pairs holds counts per pair: ``--wins-col``, ``--losses-col`` or ``--ties-col`` given."""
    return any(getattr(args, d, None) for d in ("wins_col", "losses_col", "ties_col"))


def pair_columns(args, layout: str = "") -> dict:
    """{argument of ``from_frame`` (``from_counts`` for a file of counts): (the user's column, the option
    that names it)} for the columns a pairs file has under ``args`` (a crowd model's user column
    defaults to ``user``; no label column for a winner-first file or a file of counts, whose columns of
    wins and losses default to ``wins`` and ``losses``). ``layout``: words before each option ("the
    run's " for a run's layout)."""
    e = zoo.entry(getattr(args, "model", "gppl"))
    user = getattr(args, "user_col", None)
    named = {"a": args.a_col, "b": args.b_col,
             "user": (user or "user") if e.data == "crowd pairs" else user if zoo.takes_users(e) else None}
    if has_counts(args):
        named.update(wins=getattr(args, "wins_col", None) or "wins",
                     losses=getattr(args, "losses_col", None) or "losses",
                     tied=getattr(args, "ties_col", None))
    else:
        named.update(y=None if getattr(args, "winner_first", False) or args.y_col == "" else args.y_col,
                     tie=getattr(args, "tie_col", None), weight=getattr(args, "weight_col", None))
    return {arg: (col, layout + PAIR_OPTIONS[arg]) for arg, col in named.items() if col}


def _items_table(path, args, sep: str):
    """The features of ``--items`` indexed by id (``--id-col``, ``--features``, ``--one-hot``), or None."""
    if path is None:
        return None
    raw = _read_csv(path, "--items", sep)
    id_col = getattr(args, "id_col", None) or "id"
    _need_columns(raw, path, "--items", {id_col: "--id-col"})
    return _table_features(raw.set_index(id_col), path, ITEMS, getattr(args, "features", None),
                           getattr(args, "one_hot", None))


def _users_table(args, sep: str):
    """The features of ``--users`` indexed by id (``--user-id-col``, ``--user-features``,
    ``--user-one-hot``), or None without ``--users``."""
    if not getattr(args, "users", None):
        return None
    uid = args.user_id_col or getattr(args, "id_col", None) or "id"
    users = _read_csv(args.users, "--users", sep)
    _need_columns(users, args.users, "--users", {uid: "--user-id-col"})
    return _table_features(users.set_index(uid), args.users, USERS, args.user_features, args.user_one_hot)


def load_csvs(pairs_path, items_path, args, shard: bool = False, flag: str = "--pairs", layout: str = ""):
    """(the frame of ``--pairs``, PairwiseData) from the CSVs: ``--pairs``, ``--items`` (optional: item
    ids in ``--id-col``, features chosen by ``--features``/``--one-hot``) and, for crowd models,
    ``--users`` (``--user-features``/``--user-one-hot``). ``shard``: only this rank's share of
    ``--pairs`` (a ``--distributed`` fit; :mod:`crowdzoo.data.shard`), read in chunks so that no rank
    holds every label (the frame is then None). ``flag``: the option that names the pairs file;
    ``layout``: "the run's " when its columns are a run's (``report --test``). The data API's errors
    come back naming the flags and the user's columns (:func:`~crowdzoo.cli.messages.cli_message`)."""
    from ..data import PairwiseData

    sep = getattr(args, "sep", ",")
    cols = pair_columns(args, layout)
    pairs = _read_csv(pairs_path, flag, sep, nrows=1 if shard else None)  # a shard: the checks only
    _need_columns(pairs, pairs_path, flag, dict(cols.values()), settable=not layout)
    if len(pairs) == 0:
        raise DataError(f"{flag}: {pairs_path} has a header but no rows (no labels)", arg=flag)
    items = _items_table(items_path, args, sep)
    # y=None: every row is a ≻ b (winner first); tie=: a column flagging ties; weight=: each row's
    # weight; items=None: the ids seen in the pairs, without features
    counts = has_counts(args)
    names = ("a", "b", "wins", "losses", "tied") if counts else ("a", "b", "y", "tie", "weight")
    kw = {arg: cols[arg][0] if arg in cols else None for arg in names}
    if getattr(args, "ties", None):
        kw["ties"] = args.ties
    if "user" in cols:
        kw.update(user=cols["user"][0], users=_users_table(args, sep))
    try:
        if shard and counts:
            raise DataError(f"{flag}: a file of counts (--wins-col, --losses-col, --ties-col) is read whole, "
                            "not in shards; fit it without --distributed, or give one label per row with "
                            "--weight-col", arg=flag)
        if shard:
            return None, PairwiseData.read_shard(pairs_path, items=items, sep=sep, **kw)
        if counts:
            return pairs, PairwiseData.from_counts(pairs, items, **kw)
        return pairs, PairwiseData.from_frame(pairs, items, **kw)
    except DataError as err:
        msg = cli_message(err, pairs_places(flag, cols), None if layout else FIT_ADVICE, flag)
        raise DataError(msg, arg=flag, row=err.row, ids=err.ids) from None
