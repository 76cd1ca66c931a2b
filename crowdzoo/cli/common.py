"""What the two halves of the command line share: :mod:`crowdzoo.cli` (preference pairs) and
:mod:`crowdzoo.cli_links` (links models) both import this module and neither imports the other at
module level: reading CSV tables and their feature columns, the route flags generated from the
routes' signatures and the plan of a fit they fill, and the run folder's files.
"""
from __future__ import annotations

import dataclasses
import functools
import re
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from .. import zoo
from ..errors import DataError
from .flags import route_signature_static

#: CLI option → the model setting it fills (only models with that setting receive it)
MODEL_OPTIONS = {"n_inducing": "n_inducing", "kernel": "kernel", "components": "n_components",
                 "n_inducing_users": "n_inducing_users"}
#: route parameters that are not command-line flags (objects, or set by the CLI itself)
NOT_FLAGS = frozenset({"setup", "callback", "resume", "checkpoint", "progress_bar", "guide", "entry", "seed"})
#: the files a run folder holds; ``--overwrite`` removes them before the new run writes its own
RUN_FILES = ("posterior.pt", "metrics.json", "run.json", "utilities.csv", "utilities_personal.csv",
             "predictions.csv", "checkpoint.pt", "checkpoint.pt.tmp", "diagnostics.html", "diagnostics.md",
             "report.html", "report.md", "clusters.csv", "workers.csv")
_TYPES = {"bool": bool, "int": int, "float": float, "str": str}


def _setting_type(default, annotation):
    """The CLI type of a route setting: from its default, else its annotation (``float | None``)."""
    if isinstance(default, bool | int | float | str):
        return type(default)
    if default is None and annotation:
        for name in (t.strip() for t in annotation.split("|")):
            if name in _TYPES:
                return _TYPES[name]
    return None


@dataclasses.dataclass(frozen=True)
class RouteFlag:
    """One generated flag: the route setting ``name`` of every route that has it."""

    name: str
    flag: str
    type: type
    defaults: tuple  # ((default, (route, ...)), ...)

    @property
    def dest(self) -> str:
        return f"route_{self.name}"

    def help(self) -> str:
        shown = "; ".join(f"{'unset' if d is None else repr(d)} ({', '.join(routes)})"
                          for d, routes in self.defaults)
        return f"route setting {self.name}; default {shown}"


@functools.lru_cache(maxsize=1)
def route_flags() -> dict:
    """{setting: RouteFlag} over every route of the zoo, read from the routes' source (no torch)."""
    found: dict = {}
    for e in zoo.ZOO:
        for method in e.routes:
            where = method if e.is_generic(method) else f"{e.name} {method}"
            for name, (default, ann) in route_signature_static(e, method).items():
                t = _setting_type(default, ann)
                if name in NOT_FLAGS or t is None:
                    continue
                types, defaults = found.setdefault(name, (set(), {}))
                types.add(t)
                routes = defaults.setdefault(default, [])
                if where not in routes:
                    routes.append(where)
    out = {}
    for name, (types, defaults) in found.items():
        t = types.pop() if len(types) == 1 else float if types <= {int, float} else str
        out[name] = RouteFlag(name, "--" + name.replace("_", "-"), t,
                              tuple((d, tuple(r)) for d, r in defaults.items()))
    return out


#: ``--n-inducing all``: every item inducing (the model setting None)
ALL = "all"


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


def _need_columns(frame: pd.DataFrame, path, flag: str, wanted: dict) -> None:
    """Each column of ``wanted`` ({column: the option that names it}) is in ``frame``."""
    for col, option in wanted.items():
        if col not in frame.columns:
            raise DataError(f"{flag}: column {col!r} ({option}) not found in {path} (columns: "
                            f"{list(frame.columns)}); set {option}{_sep_hint(frame)}")


def _sep_hint(frame: pd.DataFrame) -> str:
    """When a CSV read as one column holds another separator in its name, a hint to set --sep."""
    if len(frame.columns) == 1:
        found = [s for s in (";", "\t", "|", ",") if s in str(frame.columns[0])]
        if found:
            return f"; the file looks {found[0]!r}-separated: set --sep {found[0]!r}"
    return ""


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
    from ..errors import _show

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
    from ..errors import _show

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


def _flag_names(msg: str) -> str:
    """Route settings named in a message (``max_iter``, ``tol=0.001``) written as the CLI's flags."""
    for name, spec in route_flags().items():
        msg = re.sub(rf"\b{name}=", spec.flag + "=", msg)
        if "_" in name:
            msg = re.sub(rf"(?<![-\w]){name}\b", spec.flag, msg)
    return msg


def _plan(args) -> dict:
    """The model, route and settings a fit will use. Every option the user gave must apply to the
    chosen model and route: one that does not is refused (a DataError naming the flag)."""
    e = zoo.entry(getattr(args, "model", "gppl"))
    args.method = args.method or e.default
    if args.method not in e.routes:
        raise DataError(f"--method: {e.name} has no route {args.method!r}; its routes are {list(e.routes)} "
                        f"(default {e.default!r})")
    static = route_signature_static(e, args.method)
    where = f"{e.name}'s {args.method!r} route"
    flags = route_flags()
    settings = {}
    for name, spec in flags.items():
        value = getattr(args, spec.dest, None)
        if value is None:
            continue
        if name not in static:
            takes = sorted(flags[n].flag for n in static if n in flags)
            raise DataError(f"{spec.flag}: not a setting of {where}; it takes {', '.join(takes) or 'none'}")
        if _setting_type(*static[name]) is int and isinstance(value, float):
            if not value.is_integer():
                raise DataError(f"{spec.flag}: {where} takes a whole number, got {value}")
            value = int(value)
        settings[name] = value
    if getattr(args, "resume", None):
        if "resume" not in static:
            can = [f"{x.name} {m}" for x in zoo.ZOO for m in x.routes
                   if "resume" in route_signature_static(x, m)]
            raise DataError(f"--resume: {where} keeps no checkpoint to resume from; the routes that do: "
                            f"{', '.join(can)}")
        if not Path(args.resume).is_file():
            raise DataError(f"--resume: no checkpoint file {args.resume} (an interrupted fit writes "
                            "OUT/checkpoint.pt)")
        settings["resume"] = str(args.resume)
    if "progress_bar" in static and args.no_progress:
        settings["progress_bar"] = False
    elif "progress_bar" in static and not sys.stderr.isatty():
        settings["progress_bar"] = "log"  # stderr goes to a file: a line every 30 s, not a bar
    if getattr(args, "quick", False) and args.method == "natgrad" and "max_iter" not in settings:
        settings["max_iter"] = 200
    crowd_models = [x.name for x in zoo.ZOO if zoo.takes_users(x)]
    if not zoo.takes_users(e):
        for opt in ("users", "user_col", "user_id_col", "user_features", "user_one_hot"):
            if getattr(args, opt, None) is not None:
                raise DataError(f"--{opt.replace('_', '-')}: {e.name} pools every user's labels into one "
                                f"preference, so it takes no users; to model users fit one of {crowd_models}")
    for opt in ("user_id_col", "user_features", "user_one_hot"):
        if getattr(args, opt, None) is not None and not getattr(args, "users", None):
            raise DataError(f"--{opt.replace('_', '-')}: applies to --users, which was not given")
    if getattr(args, "items", "") is None:
        for opt in ("id_col", "features", "one_hot"):
            if getattr(args, opt, None) is not None:
                raise DataError(f"--{opt.replace('_', '-')}: applies to --items, which was not given")
    if getattr(args, "winner_first", False) and args.y_col not in ("y", ""):
        raise DataError(f"--winner-first: says --pairs has no label column, but --y-col names one "
                        f"({args.y_col!r}); give one or the other")
    cls = e.model_class()
    fields = {f.name for f in dataclasses.fields(cls)}
    model_kw = {}
    for opt, name in MODEL_OPTIONS.items():
        value = getattr(args, opt, None)
        if value is None:  # the model's own default, as crowdzoo.fit(Model(), data) has it
            continue
        if name not in fields:
            raise DataError(f"--{opt.replace('_', '-')}: {e.name} ({cls.__name__}) has no setting {name}")
        model_kw[name] = None if value == ALL else value
    return {"entry": e, "settings": settings, "model_kw": model_kw, "static": static}


def check_out_file(args) -> None:
    """predict's ``-o``: a file in an existing folder, replaced only with --overwrite."""
    if not args.out:
        return
    out = Path(args.out)
    if out.is_dir():
        raise DataError(f"--out: {args.out} is a folder; name the CSV file to write")
    if out.exists() and not args.overwrite:
        raise DataError(f"--out: {args.out} exists; name a new file, or pass --overwrite to replace it")
    if not out.absolute().parent.is_dir():
        raise DataError(f"--out: the folder of {args.out} does not exist")
    _check_out(out.absolute().parent, overwrite=True)


def write_result(result: pd.DataFrame, out, sep: str, what: str) -> None:
    """``predict``'s table to the file ``out`` (saying ``what`` — with ``{n}`` for its rows — on
    stderr) or to standard output."""
    if out:
        result.to_csv(out, sep=sep, index=False)
        print(f"predict: {what.format(n=len(result))} written to {out}", file=sys.stderr)
    else:
        result.to_csv(sys.stdout, sep=sep, index=False)


def _resume_file(args, out: Path):
    """The resolved --resume path when it lies in ``out`` (kept by the out-folder checks)."""
    resume = getattr(args, "resume", None)
    if resume and Path(resume).resolve().parent == out.resolve():
        return Path(resume).resolve()
    return None


def _check_out(out: Path, overwrite: bool, keep=None) -> None:
    """``--out`` before anything is fitted: a folder (or a new one) that can be written, holding no
    earlier run unless ``overwrite``. Creates nothing."""
    if out.exists() and not out.is_dir():
        raise DataError(f"--out: {out} is a file, not a folder; name a folder for the run")
    if out.is_dir():
        found = [f for f in RUN_FILES if (out / f).exists() and (out / f).resolve() != keep]
        if found and not overwrite:
            if found == ["checkpoint.pt"]:
                raise DataError(f"--out: {out} holds the checkpoint of an interrupted fit; continue it with "
                                f"--resume {out / 'checkpoint.pt'}, or pass --overwrite to start again")
            raise DataError(f"--out: {out} already holds a run ({', '.join(found)}); name a new folder, or "
                            "pass --overwrite to replace it")
        others = sorted(p.name for p in out.iterdir() if p.name not in RUN_FILES)
        if others and not overwrite:
            shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
            raise DataError(f"--out: {out} is a folder that is not a run (it holds {shown}); name a new "
                            "folder for the run, or pass --overwrite to write the run's files beside those")
        base = out
    else:
        base = out.absolute().parent
        while not base.exists():
            base = base.parent
        if not base.is_dir():
            raise DataError(f"--out: cannot make the folder {out}: {base} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(dir=base, prefix=".crowdzoo-")
    except OSError as err:
        raise DataError(f"--out: cannot write in {base} ({err.strerror or err}); choose a folder you can "
                        "write to") from None
    import os

    os.close(fd)
    os.unlink(probe)


def _prepare_out(out: Path, keep=None) -> list:
    """Make ``out`` (returns the folders made, for :func:`_remove_empty`) and remove an earlier
    run's files from it (``--overwrite`` was checked by :func:`_check_out`), except ``keep``."""
    made = []
    p = out.absolute()
    while not p.exists():
        made.append(p)
        p = p.parent
    out.mkdir(parents=True, exist_ok=True)
    for name in RUN_FILES:
        f = out / name
        if f.is_file() and f.resolve() != keep:
            f.unlink()
    return made


def _remove_empty(made: list) -> None:
    for p in made:  # deepest first
        try:
            p.rmdir()
        except OSError:
            return


def _setting_message(msg: str) -> str:
    """A route's DataError naming a setting, rewritten to name its flag."""
    m = re.match(r"^(\w+): ", msg)
    if m and m.group(1) in route_flags():
        msg = route_flags()[m.group(1)].flag + msg[len(m.group(1)):]
    elif m and m.group(1) in ("resume", "method"):
        msg = "--" + msg
    return _flag_names(msg)


def _load_run(run_dir: Path, what: str):
    import crowdzoo as cz

    if not (run_dir / "posterior.pt").is_file():
        raise DataError(f"{what}: {run_dir} has no posterior.pt (write one with `crowdzoo fit ... --out "
                        f"{run_dir}`)")
    return cz.load(run_dir / "posterior.pt")
