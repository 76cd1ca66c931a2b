"""The ``crowdzoo`` command line: ``fit``, ``demo``, ``compare``.

    crowdzoo models                       the zoo's models, their data and routes (from crowdzoo.zoo)
    crowdzoo fit gppl --pairs PAIRS.csv --items ITEMS.csv --method natgrad --out DIR
    crowdzoo fit crowdgppl --pairs PAIRS.csv --items ITEMS.csv [--users USERS.csv] --out DIR
    crowdzoo fit gppl --pairs PAIRS.csv --method natgrad --max-iter 200 --tol 1e-3 --out DIR
    crowdzoo fit gppl ... --resume DIR/checkpoint.pt       continue a fit stopped by Ctrl-C
    crowdzoo predict RUN_DIR --pairs NEW.csv -o NEW_P.csv    P(a ≻ b) for new pairs
    crowdzoo fit scdc --links LINKS.csv --items ITEMS.csv --out DIR   links models: crowdzoo.cli_links
    crowdzoo predict RUN_DIR --items NEW.csv -o NEW_Z.csv    clusters of new items (a links run)
    crowdzoo demo --out runs/demo
    crowdzoo compare gppl-routes --repeats 3 --jobs 2 --out docs/gppl-routes.md
    crowdzoo report RUN_DIR -o report.html [--reference NUTS_RUN_DIR]

Bad input ends with one ``crowdzoo: error: ...`` line naming the flag and exit status 2; a numerical
failure with its advice and status 3; Ctrl-C with one line naming the checkpoint and the command that
continues the fit, status 130. Warnings of a fit come as ``crowdzoo: warning: ...`` lines.

The route settings (``--max-iter``, ``--tol``, ``--batch-size``, ...) are generated from the
routes' signatures, read from their source files (:func:`crowdzoo.route_signature_static`), so
``--help`` answers without importing torch; a given flag that the chosen route does not take is
refused, as is any option that does not apply to the chosen model.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .. import zoo
from ..errors import DataError, NumericalError
from . import links as cli_links
from .common import (
    ALL,
    ITEMS,
    MODEL_OPTIONS,
    ONE_HOT_HELP,
    USERS,
    _check_out,
    _flag_names,
    _load_run,
    _names,
    _need_columns,
    _plan,
    _prepare_out,
    _read_csv,
    _remove_empty,
    _resume_file,
    _sep_hint,
    _setting_message,
    _table_features,
    check_out_file,
    route_flags,
    write_result,
)
from .flags import model_defaults_static, route_signature_static

MODELS = tuple(e.name for e in zoo.ZOO)
METHODS = tuple(sorted({m for e in zoo.ZOO for m in e.routes}))
#: the tables ``fit --outputs`` may choose
OUTPUTS = ("utilities", "personal", "predictions")


#: the largest items × users table fit writes as utilities_personal.csv (about 25 MB of text)
PERSONAL_CELLS = 10**6


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except where it is unset (None): those say theirs in words."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or not action.help:
            return action.help
        return super()._get_help_string(action)

    def _fill_text(self, text, width, indent):  # keep the line breaks of a text (each line wrapped)
        import textwrap

        return "\n".join(textwrap.fill(line, width, initial_indent=indent,
                                        subsequent_indent=indent + " " * (len(line) - len(line.lstrip()) + 2))
                          for line in text.splitlines())


Y_HELP = ("y is 1 if a is preferred to b and 0 if b is preferred to a (0.5: a tie, see --ties); a file "
          "that lists the preferred item first (winner, loser) needs no y: pass --winner-first")


def _parser() -> argparse.ArgumentParser:
    fmt = {"formatter_class": _HelpFormatter}
    ap = argparse.ArgumentParser(prog="crowdzoo", description="Bayesian models of pairwise crowd labels",
                                 **fmt)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("models", help="list the zoo's models, the data each takes and its routes", **fmt)
    fit = sub.add_parser("fit", help="fit a model to CSV files", description=(
        "Fit a model to pairwise labels in CSV files and write utilities, predictions, metrics and the "
        f"posterior to --out. --pairs has one row per label: item ids a and b, and {Y_HELP}. The links "
        "models (scdc, bayesscdc) read --links and --items instead: see their heading below."),
        epilog=model_defaults_help(), **fmt)
    fit.add_argument("model", choices=MODELS)
    fit.add_argument("--pairs", default=None,
                     help="preference models (all but the links models): CSV with one row per label: "
                          "columns --a-col, --b-col, --y-col (and a user column for crowd models)")
    fit.add_argument("--items", default=None,
                     help="CSV of item features with an id column (--id-col); without it the items are the "
                          "ids seen in --pairs, with no features (independent utilities)")
    fit.add_argument("--users", default=None,
                     help="crowd models: CSV of user features with an id column (--user-id-col)")
    fit.add_argument("--user-col", default=None,
                     help="crowd models: the user-id column of --pairs (default: user)")
    fit.add_argument("--user-id-col", default=None,
                     help="the user-id column of --users (default: --id-col's)")
    _table_flags(fit, USERS)
    fit.add_argument("--components", type=int, default=None,
                     help="models with latent components (crowdgppl): C (default: the model's)")
    fit.add_argument("--n-inducing-users", type=_inducing, default=None, metavar="M|all|auto",
                     help="crowdgppl: M_u inducing users, 'all' (every user) or 'auto' (default: the "
                          "model's)")
    _csv_options(fit)
    cli_links.add_fit_options(fit)
    _fit_options(fit)
    demo = sub.add_parser("demo", help="simulate data, fit GPPL, evaluate and write a report", **fmt)
    demo.add_argument("--quick", action="store_true", help="a small problem (seconds)")
    _fit_options(demo, out_default="runs/demo")
    pred = sub.add_parser("predict", help="P(a ≻ b) for new pairs from a fitted run", description=(
        "Predict P(a ≻ b) for each row of a CSV of pairs from a run folder written by `crowdzoo fit` "
        "(its posterior.pt), reading the columns the run used (its run.json): crowd models predict each "
        "row's user's preference. For a run of a links model (scdc, bayesscdc), --items gives new items "
        "instead, and each one's most probable cluster is written."), **fmt)
    pred.add_argument("run_dir", help="a folder written by `crowdzoo fit` or `crowdzoo demo`")
    pred.add_argument("--pairs", default=None,
                      help="CSV of pairs with the run's --a-col and --b-col (and --user-col) columns; a "
                           "label column is not needed")
    pred.add_argument("--items", default=None,
                      help="a run of a links model (scdc, bayesscdc): CSV of new items with the run's id and "
                           "feature columns; writes each item's most probable cluster and its probability")
    pred.add_argument("-o", "--out", default=None,
                      help="CSV to write: the rows of --pairs with a column p = P(a ≻ b) (default: standard "
                           "output)")
    pred.add_argument("--overwrite", action="store_true", help="replace the file --out if it exists")
    pred.add_argument("--sep", default=None,
                      help="the separator of --pairs and of --out (default: the run's)")
    pred.add_argument("--consensus", action="store_true",
                      help="crowd models: the consensus preference instead of each row's user's")
    pred.add_argument("--unknown-users", "--new-users", dest="unknown_users", default="error",
                      choices=("error", "consensus", "prior", "drop"),
                      help="crowd models, rows whose user the run was not fitted on: refuse the file "
                           "(error), predict the population's preference (consensus), the model's prior "
                           "predictive of a new user (prior: DPM, crowdGPPL), or leave the rows out (drop)")
    cmp_ = sub.add_parser("compare", help="run a comparison of the zoo (tables beside the papers')", **fmt)
    cmp_.add_argument("name", help="a comparison of the zoo, or one's own as module:object (an object with "
                      "run_one(seed, quick=...) → tidy DataFrame and summarise(df) → Markdown; a module file "
                      "in the working folder is found)")
    cmp_.add_argument("--repeats", type=int, default=1)
    cmp_.add_argument("--jobs", type=int, default=1)
    cmp_.add_argument("--quick", action="store_true", help="smaller settings (each comparison says which)")
    cmp_.add_argument("--executor", default=None,
                      help="a Dask scheduler address (e.g. tcp://host:8786): every repeat runs on that "
                           'cluster (needs pip install "crowdzoo[dask]"; --jobs is then unused); default: '
                           "local processes")
    cmp_.add_argument("--data-dir", default=None,
                      help="sushi-*, dpm-sushi-a: folder with Kamishima's Sushi files; scdc-mnist: MNIST's "
                           "training idx files and crowd_annotations_mnist.npy (neither is shipped)")
    cmp_.add_argument("--out", default=None, help="markdown file (the tidy CSV goes beside it)")
    rep = sub.add_parser("report", help="posterior diagnostic report of a run (HTML or Markdown)", **fmt)
    rep.add_argument("run_dir", help="a folder written by `crowdzoo fit` or `crowdzoo demo`")
    rep.add_argument("-o", "--out", default=None, help="report.html (default) or report.md; "
                     "default RUN_DIR/diagnostics.html")
    rep.add_argument("--reference", default=None,
                     help="a NUTS run of the same data (its folder): adds the agreement check")
    rep.add_argument("--draws", type=int, default=500, help="draws of an approximate posterior")
    rep.add_argument("--test", default=None, metavar="PAIRS.csv",
                     help="held-out labels for the held-out calibration check: a CSV laid out as the run's "
                          "--pairs (its separator and columns, from run.json); ties are left out (default: "
                          "the split == test rows of the run's predictions.csv, from --test-fraction)")
    return ap


def _inducing(value: str):
    """``--n-inducing``'s value: a positive whole number, "all" or "auto"."""
    if value in (ALL, "auto"):
        return value
    m = int(value) if value.isdigit() else 0
    if m < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, 'all' or 'auto', got {value!r}")
    return m


def model_defaults_help() -> str:
    """The model settings the CLI's options fill, with each model's default (those of ``Model()`` in
    Python, which a fit without the option uses), read from the models' source."""
    lines = ["model defaults (the Python API's; an option given replaces its setting):"]
    for e in zoo.ZOO:
        if e.data == "links":
            continue
        d = model_defaults_static(e)
        shown = [f"--{opt.replace('_', '-')} " + (ALL if d[name] is None else str(d[name]))
                 for opt, name in MODEL_OPTIONS.items() if name in d]
        lines.append(f"  {e.name}: {', '.join(shown) or 'none of these options'}")
    return "\n".join(lines)


def _table_flags(p, t) -> None:
    """The flags that choose a feature table's columns (``--features``/``--one-hot`` for --items,
    ``--user-features``/``--user-one-hot`` for --users)."""
    p.add_argument(t.features, default=None, metavar="COL,...",
                   help=f"the feature columns of {t.flag} to use (default: all but the {t.what}-id column)")
    p.add_argument(t.one_hot, default=None, metavar="COL,...",
                   help=f"categorical columns of {t.flag} to one-hot encode as features (a column of yes/no "
                        "or true/false is read as 1/0 without it; any other string column is refused)"
                        + ONE_HOT_HELP)


def _csv_options(p):
    """How the CSV files are laid out (``fit``; ``demo`` uses the defaults)."""
    p.add_argument("--sep", default=",", help="the field separator of the CSV files (e.g. ';')")
    p.add_argument("--id-col", default=None, help="the item-id column of --items (default: id)")
    _table_flags(p, ITEMS)
    p.add_argument("--a-col", default="a", help="the column of --pairs holding the first item's id")
    p.add_argument("--b-col", default="b", help="the column of --pairs holding the second item's id")
    p.add_argument("--y-col", default="y", help=f"the label column of --pairs: {Y_HELP} (or --y-col '')")
    p.add_argument("--winner-first", action="store_true",
                   help="--a-col always holds the preferred item and --pairs has no label column "
                        "(same as --y-col '')")
    p.add_argument("--tie-col", default=None,
                   help="a column of --pairs that is true (1) where the label is a tie")
    p.add_argument("--ties", default=None, choices=("drop", "half"),
                   help="ties (y = 0.5, or --tie-col true): drop them, or count each as half a preference "
                        "each way (default: a tie is an error)")


def _fit_options(p, out_default=None):
    p.add_argument("--method", default=None, choices=METHODS,
                   help="the route (default: the model's first in `crowdzoo models`)")
    p.add_argument("--out", required=out_default is None, default=out_default,
                   help="the run folder to write: a new one, or an earlier run's with --overwrite")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the run in --out (its files are removed before the new run writes its own)")
    p.add_argument("--seed", type=int, default=0,
                   help="the random seed (fits with one seed are bit-identical)")
    p.add_argument("--n-inducing", type=_inducing, default=None, metavar="M|all|auto",
                   help="M inducing items for models that have them, 'all' (every item: exact) or 'auto' "
                        "(every item up to 500, then 500) (default: the model's, as in the Python API; "
                        "listed below)")
    p.add_argument("--kernel", default=None, choices=("matern32", "se"),
                   help="the item kernel (default: the model's; matern32 for gppl and crowdgppl)")
    p.add_argument("--test-fraction", type=float, default=None, help="hold out this share of pairs")
    p.add_argument("--outputs", default=",".join(OUTPUTS), metavar="NAME,...",
                   help="the tables to write beside posterior.pt, metrics.json and run.json: utilities "
                        "(utilities.csv), personal (utilities_personal.csv, crowd models), predictions "
                        "(predictions.csv and the training scores, which at 10⁶ labels take longer than "
                        "a short fit); e.g. --outputs utilities for the fit alone")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on a terminal, no progress "
                   "lines (one every 30 s) when stderr is a file")
    p.add_argument("--resume", default=None, metavar="CHECKPOINT",
                   help="continue a fit stopped by Ctrl-C from the checkpoint it wrote (OUT/checkpoint.pt; "
                        "routes with checkpoints only)")
    group = p.add_argument_group(
        "route settings", "generated from the routes' signatures; each route takes some of them (see "
        "`crowdzoo models` for the routes) and a flag the chosen route does not take is refused")
    taken = set(p._option_string_actions)
    for spec in route_flags().values():
        if spec.flag in taken:
            continue
        if spec.type is bool:
            group.add_argument(spec.flag, dest=spec.dest, action=argparse.BooleanOptionalAction, default=None,
                               help=spec.help())
        else:
            group.add_argument(spec.flag, dest=spec.dest, type=spec.type, default=None, help=spec.help(),
                               metavar=spec.type.__name__.upper())


def _cli_message(msg: str, cols: dict) -> str:
    """A DataError of the data API rewritten to name the CLI's flags and the user's columns.
    ``cols``: {API argument: (the user's column, its flag)}."""
    msg = re.sub(r"^from_frame: ", "", msg)
    a, b = cols.get("a"), cols.get("b")
    rules = [(r"^df: ", "--pairs: "), (r"^(items|item_features|item_ids): ", "--items: "),
             (r"^(user_features|user_ids): ", "--users: "), (r"^ties: ", "--ties: "),
             (r"^tie: ", "--tie-col: ")]
    if a and b:
        rules.append((r"^a, b: ", f"--pairs, columns {a[0]!r} ({a[1]}) and {b[0]!r} ({b[1]}): "))
    for arg in ("a", "b", "y", "tie", "user", "users"):
        if cols.get(arg):
            rules.append((rf"^{arg}: ", f"--pairs, column {cols[arg][0]!r} ({cols[arg][1]}): "))
    rules += [(r"^users: ", "--users: "), (r"^column", "--pairs: column")]
    for pattern, repl in rules:
        new = re.sub(pattern, lambda m, r=repl: r, msg)
        if new != msg:
            msg = new
            break
    msg = re.sub(r"\bties=['\"](\w+)['\"]", r"--ties \1", msg)
    msg = re.sub(r"\ba tie= column\b", "--tie-col", msg)
    msg = re.sub(r"\bin (items|users) table\b", r"in --\1", msg)
    return re.sub(r"\b(in|of) df\b", r"\1 --pairs", msg)


def load_csvs(pairs_path, items_path, args, shard: bool = False):
    """(the frame of ``--pairs``, PairwiseData) from the CSVs: ``--pairs``, ``--items`` (optional: item
    ids in ``--id-col``, features chosen by ``--features``/``--one-hot``) and, for crowd models,
    ``--users`` (``--user-features``/``--user-one-hot``). ``shard``:
    only this rank's share of ``--pairs`` (a ``--distributed`` fit; :mod:`crowdzoo.data.shard`), read
    in chunks so that no rank holds every label (the frame is then None)."""
    from ..data import PairwiseData

    sep = getattr(args, "sep", ",")
    e = zoo.entry(getattr(args, "model", "gppl"))
    crowd = zoo.takes_users(e)
    user_col = ((getattr(args, "user_col", None) or "user") if e.data == "crowd pairs"
                else getattr(args, "user_col", None))
    y_col = None if getattr(args, "winner_first", False) or args.y_col == "" else args.y_col
    tie_col = getattr(args, "tie_col", None)
    pairs = _read_csv(pairs_path, "--pairs", sep, nrows=1 if shard else None)  # a shard: the checks only
    need = {args.a_col: "--a-col", args.b_col: "--b-col"}
    need.update({c: f for c, f in ((y_col, "--y-col"), (user_col, "--user-col"), (tie_col, "--tie-col"))
                 if c})
    _need_columns(pairs, pairs_path, "--pairs", need)
    if len(pairs) == 0:
        raise DataError(f"--pairs: {pairs_path} has a header but no rows (no labels)")
    items = None
    if items_path is not None:
        raw = _read_csv(items_path, "--items", sep)
        id_col = getattr(args, "id_col", None) or "id"
        _need_columns(raw, items_path, "--items", {id_col: "--id-col"})
        items = _table_features(raw.set_index(id_col), items_path, ITEMS, getattr(args, "features", None),
                                getattr(args, "one_hot", None))
    # y=None: every row is a ≻ b (winner first); tie=: a column flagging ties; items=None: the ids
    # seen in the pairs, without features
    kw = {"a": args.a_col, "b": args.b_col, "y": y_col, "tie": tie_col}
    if getattr(args, "ties", None):
        kw["ties"] = args.ties
    if crowd:
        kw["user"] = user_col
        if getattr(args, "users", None):
            uid = args.user_id_col or getattr(args, "id_col", None) or "id"
            users = _read_csv(args.users, "--users", sep)
            _need_columns(users, args.users, "--users", {uid: "--user-id-col"})
            kw["users"] = _table_features(users.set_index(uid), args.users, USERS, args.user_features,
                                          args.user_one_hot)
    cols = {"a": (args.a_col, "--a-col"), "b": (args.b_col, "--b-col"), "user": (user_col, "--user-col"),
            "y": (y_col, "--y-col") if y_col else None, "tie": (tie_col, "--tie-col") if tie_col else None}
    try:
        if shard:
            return None, PairwiseData.read_shard(pairs_path, items=items, sep=sep, **kw)
        return pairs, PairwiseData.from_frame(pairs, items, **kw)
    except DataError as err:
        raise DataError(_cli_message(str(err), cols)) from None


def _lead_rank(plan) -> bool:
    """False on ranks other than 0 of a ``--distributed`` fit (they write nothing)."""
    return not plan["settings"].get("distributed") or int(os.environ.get("RANK", "0")) == 0


#: rows of --pairs predicted and written at a time (a 10⁶-row file is scored in pieces)
CHUNK = 100_000
SPLITS = ("train", "test", "dropped")


def _fresh(name: str, columns) -> str:
    """``name``, or ``name_crowdzoo`` where the user's file already has a column ``name``."""
    return name if name not in columns else f"{name}_crowdzoo"


def _predict(post, a, b, users=None) -> np.ndarray:
    """``post.predict_proba`` over ``CHUNK`` pairs at a time."""
    out = np.empty(len(a))
    for lo in range(0, len(a), CHUNK):
        part = slice(lo, lo + CHUNK)
        kw = {} if users is None else {"users": users[part]}
        out[part] = post.predict_proba(a[part], b[part], **kw)
    return out


def _row_labels(data, n_rows: int):
    """For each row of --pairs: its number of labels in ``data`` (1: decided; 2: a tie under --ties
    half; 0: a tie left out by --ties drop) and its first label (-1 where none), which has the row's
    own order of the two items (``data.source_rows`` maps labels to rows; a row's labels are
    consecutive)."""
    src = data.source_rows
    count = np.bincount(src, minlength=n_rows)
    first = np.full(n_rows, -1)
    start = np.r_[True, src[1:] != src[:-1]]
    first[src[start]] = np.flatnonzero(start)
    return count, first


def _row_p(post, data, pairs, first, args, crowd) -> np.ndarray:
    """P(the row's first item ≻ its second) for each row of --pairs, by the row's user for crowd
    models: from the row's first label, or, for a tie left out (--ties drop), from its ids where the
    fit knows them (NaN where it does not)."""
    p = np.full(len(first), np.nan)
    has = np.flatnonzero(first >= 0)
    lab = first[has]
    users = data.user_ids[data.users[lab]] if crowd else None
    p[has] = _predict(post, data.item_ids[data.a[lab]], data.item_ids[data.b[lab]], users)
    left = np.flatnonzero(first < 0)
    if left.size:
        a, b = pairs[args.a_col].to_numpy()[left], pairs[args.b_col].to_numpy()[left]
        known = ((pd.Index(data.item_ids).get_indexer(a) >= 0) & (pd.Index(data.item_ids).get_indexer(b) >= 0)
                 & (a != b))
        users = pairs[_user_col(args)].to_numpy()[left] if crowd else None
        if crowd:
            known &= pd.Index(data.user_ids).get_indexer(users) >= 0
        if known.any():
            p[left[known]] = _predict(post, a[known], b[known], users[known] if crowd else None)
    return p


def _scores(y, p) -> dict:
    """Accuracy and log loss (CEE) of the decided rows, or None for both when there are none."""
    from ..metrics import accuracy, cross_entropy

    if len(y) == 0:
        return {"accuracy": None, "cee": None}
    return {"accuracy": accuracy(y, p), "cee": cross_entropy(y, p)}


def _write_predictions(path: Path, pairs: pd.DataFrame, data, test, post, args, crowd) -> dict:
    """predictions.csv: the rows of --pairs in their order, with their own columns and separator, plus
    ``p`` = P(first item ≻ second item) and, with a held-out share, ``split`` (train, test, or dropped:
    a tie left out by --ties drop). Returns the metrics: accuracy and log loss over the decided rows of
    each split (a tie is neither a hit nor a miss and has no log loss: there is no tie likelihood).
    ``data``: every label read from ``pairs``; ``test``: the held-out ones (or None)."""
    n = len(pairs)
    count, first = _row_labels(data, n)
    p = _row_p(post, data, pairs, first, args, crowd)
    code = np.zeros(n, dtype=np.int8)
    if test is not None:
        code[count == 0] = SPLITS.index("dropped")
        code[test.source_rows] = SPLITS.index("test")
    decided = count == 1
    y = np.where(decided, data.y[np.maximum(first, 0)], np.nan)  # a decided row's one label
    metrics = {"n_rows": n, "n_ties": int((~decided).sum())}
    for k, split in enumerate(SPLITS[:1 if test is None else 2]):
        rows = decided & (code == k)
        metrics[f"{split}_scored_rows"] = int(rows.sum())
        metrics.update({f"{split}_{m}": v for m, v in _scores(y[rows], p[rows]).items()})
    extra = {_fresh("p", pairs.columns): p}
    if test is not None:
        extra[_fresh("split", pairs.columns)] = pd.Categorical.from_codes(code, SPLITS)
    with open(path, "w", newline="") as f:
        for lo in range(0, n, CHUNK):
            part = pairs.iloc[lo:lo + CHUNK].assign(**{k: v[lo:lo + CHUNK] for k, v in extra.items()})
            part.to_csv(f, sep=args.sep, index=False, header=lo == 0)
    return metrics


def _user_col(args) -> str:
    return getattr(args, "user_col", None) or "user"


def run_fit(data, args, out: Path, f_true=None, plan: dict | None = None, pairs=None) -> dict:
    """Fit, predict and write utilities.csv (and utilities_personal.csv for crowd models),
    predictions.csv, metrics.json, run.json, posterior.pt (on rank 0 only, for ``--distributed``).
    ``pairs``: the frame ``data`` was read from (None for a shard: rank 0 reads its rows again)."""
    import crowdzoo as cz

    from ..metrics import kendall_tau

    plan = plan or _plan(args)
    e, settings = plan["entry"], dict(plan["settings"])
    outputs = _outputs(args)
    train, test = (cz.split_pairs(data, args.test_fraction, seed=args.seed)
                   if args.test_fraction else (data, None))
    crowd = e.data == "crowd pairs"
    model = e.model_class()(**plan["model_kw"])
    if not _lead_rank(plan):
        cz.fit(model, train, method=args.method, seed=args.seed, **settings)
        return {}
    made = _prepare_out(out, keep=_resume_file(args, out))
    ckpt = out / "checkpoint.pt"
    if "checkpoint" in plan["static"]:
        settings["checkpoint"] = str(ckpt)
        args.checkpoint_path = str(ckpt)  # for the message of an interrupted fit (main)
    t0 = time.perf_counter()
    try:
        post = cz.fit(model, train, method=args.method, seed=args.seed, **settings)
    except DataError as err:
        _remove_empty(made)
        raise DataError(_setting_message(str(err))) from None
    except BaseException:
        _remove_empty(made)
        raise
    seconds = time.perf_counter() - t0
    post.save(out / "posterior.pt")  # first: whatever happens while scoring, the fit is kept
    if ckpt.is_file() and not settings.get("checkpoint_every"):
        ckpt.unlink()  # the fit finished: posterior.pt holds it (and its loop state)
    print(f"crowdzoo: fitted {e.name} by {args.method or 'its default route'} in {seconds:.1f} s"
          + (f" ({post.settings['iterations']} iterations, "
             f"{'converged' if post.settings.get('converged') else 'not converged'})"
             if "iterations" in post.settings else "") + f"; wrote {out / 'posterior.pt'}; scoring the "
          f"{train.n_pairs:,} training labels", file=sys.stderr, flush=True)
    mean = None
    if "utilities" in outputs or f_true is not None:
        try:
            mean, var = post.utilities()
        except (NotImplementedError, DataError):  # collabGP has no utility per item
            pass
    written = []
    if mean is not None and "utilities" in outputs:
        table = pd.DataFrame({"item": mean.index, "mean": mean.values, "variance": var.values})
        table.sort_values("mean", ascending=False).to_csv(out / "utilities.csv", index=False)
        written.append("utilities.csv")
    elif hasattr(post, "mean_preferences") and "utilities" in outputs:  # no utility per item
        post.mean_preferences(seed=args.seed).to_csv(out / "utilities.csv", index=False)
        written.append("utilities.csv")
    if "personal" in outputs and crowd and train.user_ids is not None:
        if _write_personal(out / "utilities_personal.csv", post, train):
            written.append("utilities_personal.csv")
    metrics = {"method": args.method, "seconds": seconds, "n_pairs": train.n_pairs}
    if train.label_range is not None:  # a --distributed fit: rank 0 holds (and scores) its shard alone
        lo, hi, metrics["n_pairs"] = train.label_range
        metrics["train_scored_on"] = f"rank 0's shard of --pairs: labels {lo}..{hi - 1}"
        pairs = _read_csv(args.pairs, "--pairs", args.sep, nrows=int(train.source_rows.max()) + 1)
    if "predictions" in outputs:
        metrics.update(_write_predictions(out / "predictions.csv", pairs, data, test, post, args, crowd))
        written.append("predictions.csv")
    if f_true is not None and mean is not None:
        metrics["kendall_tau_vs_truth"] = kendall_tau(f_true, mean.values)
    for k in ("iterations", "converged"):
        if k in post.settings:
            metrics[k] = post.settings[k]
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    run = {k: v for k, v in vars(args).items() if k not in ("func", "checkpoint_path")}
    if crowd:
        run["user_col"] = getattr(args, "user_col", None) or "user"
    (out / "run.json").write_text(json.dumps(run, indent=2))
    args.written = written + ["metrics.json", "run.json", "posterior.pt"]
    return metrics


def _write_personal(path: Path, post, train) -> bool:
    """utilities_personal.csv (items × users) where the model has personal utilities and the table
    holds at most :data:`PERSONAL_CELLS` numbers; says on stderr why it is left out when it is larger."""
    if train.n_items * len(train.user_ids) > PERSONAL_CELLS:
        print(f"crowdzoo: utilities_personal.csv not written: {train.n_items:,} items × "
              f"{len(train.user_ids):,} users is more than {PERSONAL_CELLS:,} numbers; predict the pairs "
              "you need with `crowdzoo predict`, or read post.utilities(users=[...]) from Python",
              file=sys.stderr)
        return False
    try:
        personal, _ = post.utilities(users=train.user_ids)
    except (TypeError, NotImplementedError, DataError):  # no personal utilities (collabGP)
        return False
    if not isinstance(personal, pd.DataFrame):
        return False
    personal.to_csv(path)
    return True


def _outputs(args) -> set:
    """The tables ``--outputs`` asks for; an unknown name, or held-out pairs with no predictions to
    score them, is refused."""
    names = _names(getattr(args, "outputs", None) or ",".join(OUTPUTS))
    bad = [n for n in names if n not in OUTPUTS]
    if bad:
        raise DataError(f"--outputs: unknown table {bad[0]!r}; choose among {', '.join(OUTPUTS)}")
    if getattr(args, "test_fraction", None) and "predictions" not in names:
        raise DataError("--outputs: --test-fraction holds pairs out to score them in predictions.csv; add "
                        "predictions to --outputs, or leave out --test-fraction")
    return set(names)


def cmd_fit(args) -> int:
    if cli_links.is_links(args.model):
        return cli_links.cmd_fit(args)
    cli_links.need_pairs(args)
    out = Path(args.out)
    plan = _plan(args)
    sharded = bool(plan["settings"].get("distributed"))
    if sharded and args.test_fraction:
        raise DataError("--test-fraction: not with --distributed (each rank reads only its shard of "
                        "--pairs); hold out pairs in a file of their own and score them with "
                        "`crowdzoo predict`")
    if not _lead_rank(plan):  # a follower rank of a torchrun launch: it fits its shard, rank 0 writes
        _, data = load_csvs(args.pairs, args.items, args, shard=True)
        run_fit(data, args, out, plan=plan)
        return 0
    _check_out(out, args.overwrite, keep=_resume_file(args, out))
    pairs, data = load_csvs(args.pairs, args.items, args, shard=sharded)
    metrics = run_fit(data, args, out, plan=plan, pairs=pairs)
    print(json.dumps(metrics, indent=2))
    print(f"wrote {', '.join(str(out / f) for f in args.written)}")
    return 0


def cmd_predict(args) -> int:
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise DataError(f"run_dir: not a folder: {run_dir}")
    run = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").is_file() else {}
    e = zoo.entry(run.get("model", "gppl"))
    if e.data == "links" or args.items is not None or args.pairs is None:
        return cli_links.cmd_predict(args, run_dir, run)
    crowd = e.data == "crowd pairs" and not args.consensus
    sep = args.sep or run.get("sep") or ","
    a_col, b_col = run.get("a_col", "a"), run.get("b_col", "b")
    user_col = run.get("user_col") or "user"
    pairs = _read_csv(args.pairs, "--pairs", sep)
    need = {a_col: "the run's --a-col", b_col: "the run's --b-col"}
    if crowd:
        need[user_col] = "the run's --user-col; or pass --consensus"
    for col, what in need.items():
        if col not in pairs.columns:
            raise DataError(f"--pairs: column {col!r} ({what}) not found in {args.pairs} (columns: "
                            f"{list(pairs.columns)}){_sep_hint(pairs)}")
    check_out_file(args)
    post = _load_run(run_dir, "run_dir")
    if crowd and args.unknown_users == "drop":
        seen = pd.Index(post.data.user_ids).get_indexer(pairs[user_col].to_numpy(dtype=object)) >= 0
        if not seen.all():
            print(f"predict: {(~seen).sum()} row(s) of --pairs left out: their user (column {user_col!r}) "
                  f"was not in the fit's data", file=sys.stderr)
        pairs = pairs[seen]
    kw = {}
    if crowd:
        kw = {"users": pairs[user_col].to_numpy(dtype=object)}
        if args.unknown_users != "drop":
            kw["new_users"] = args.unknown_users
    cols = {"a": (a_col, "the run's --a-col"), "b": (b_col, "the run's --b-col"),
            "users": (user_col, "the run's --user-col")}
    try:
        p = post.predict_proba(pairs[a_col].to_numpy(), pairs[b_col].to_numpy(), **kw)
    except DataError as err:
        raise DataError(_predict_message(err, cols)) from None
    write_result(pairs.assign(p=p), args.out, sep, "P(a ≻ b) of {n} pairs")
    return 0


def _predict_message(err: DataError, cols: dict, flag: str = "--pairs", remedy: str | None = None) -> str:
    """A prediction's DataError in the command line's words: its flags and the user's columns, from
    the fields the error carries (``arg``, ``row``, ``ids``, ``problem``). ``flag``: the file's flag;
    ``remedy``: what to do about an unseen user or item (default: predict's options)."""
    from ..errors import _show

    def shown(ids):
        return ", ".join(_show(i) for i in ids[:5]) + (", …" if len(ids) > 5 else "")

    col = cols.get(err.arg)
    if err.problem in ("unseen user", "unseen item") and col:
        what = err.problem.split()[1]
        n = len(err.ids)
        head = (f"{flag}, column {col[0]!r} ({col[1]}): row {err.row}: {what} {_show(err.ids[0])} was not "
                f"in the fit's data ({n} {what}(s) not seen: {shown(err.ids)})")
        if remedy:
            return f"{head}; {remedy}"
        if what == "user":
            return (head + "; check the ids, or pass --unknown-users consensus (the population's "
                    "preference for those rows), --unknown-users prior (a new user's prior predictive, where "
                    "the model has one), --unknown-users drop (leave those rows out) or --consensus (every "
                    "row)")
        return head + "; the run can predict only the items it was fitted on"
    if err.arg == "new_users":
        msg = str(err).replace("new_users=", "--unknown-users ").replace("'", "")
        return re.sub(r"pass user_features= for new users, or drop their rows",
                      "pass --unknown-users drop to leave their rows out", msg)
    return _cli_message(str(err), {k: (c, f) for k, (c, f) in cols.items()})


def cmd_demo(args) -> int:
    import crowdzoo as cz

    out = Path(args.out)
    csv = argparse.ArgumentParser()
    _csv_options(csv)
    for k, v in vars(csv.parse_args([])).items():
        setattr(args, k, v)
    plan = _plan(args)
    # a demo folder is remade by the next demo; any other run in it needs --overwrite
    earlier_demo = (out / "report.md").is_file() and (out / "data" / "pairs.csv").is_file()
    _check_out(out, args.overwrite or earlier_demo)
    n_items, n_pairs = (40, 400) if args.quick else (100, 2000)
    data, f_true = cz.simulate_gppl(n_items=n_items, n_pairs=n_pairs, n_features=2, seed=args.seed)
    (out / "data").mkdir(parents=True, exist_ok=True)
    data.to_frame().to_csv(out / "data" / "pairs.csv", index=False)
    data.items_frame().rename_axis("id").to_csv(out / "data" / "items.csv")
    args.test_fraction = args.test_fraction or 0.2
    pairs, data = load_csvs(out / "data" / "pairs.csv", out / "data" / "items.csv", args)
    metrics = run_fit(data, args, out, f_true=f_true, plan=plan, pairs=pairs)
    top = pd.read_csv(out / "utilities.csv").head(10)
    quick = " --quick" if args.quick else ""
    report = [
        "# crowdzoo demo: GPPL on a simulated preference problem", "",
        f"Reproduce: `crowdzoo demo --out {args.out} --method {args.method} --seed {args.seed}{quick}`",
        "", f"- data: {n_items} items with 2-D features, {n_pairs} pairwise labels drawn from GPPL "
        f"(`crowdzoo.simulate_gppl`, seed {args.seed}); 20 % of the pairs held out",
        f"- model: GPPL, Matérn 3/2 kernel, median-heuristic length-scales; route `{args.method}`", "",
        "| metric | value |", "|---|---:|",
        *[f"| {k} | {v:.3f} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in metrics.items()],
        "", "Top items by posterior mean utility:", "", _markdown(top), "",
        "Files: `utilities.csv`, `predictions.csv`, `metrics.json`, `posterior.pt` "
        "(`crowdzoo.load`), `data/`.",
    ]
    report += ["", "Posterior diagnostics (r̂/ESS or optimisation trace, PPC, calibration, PSIS-LOO): "
               f"`diagnostics.html`, remade by `crowdzoo report {args.out} -o {args.out}/diagnostics.html`."]
    (out / "report.md").write_text("\n".join(report) + "\n")
    diag = write_report(out, out / "diagnostics.html")
    print(f"demo: held-out accuracy {metrics['test_accuracy']:.3f}, CEE {metrics['test_cee']:.3f}, "
          f"Kendall tau vs truth {metrics['kendall_tau_vs_truth']:.3f}")
    print(f"demo: report written to {out / 'report.md'}; diagnostics ({diag.verdict}) to "
          f"{out / 'diagnostics.html'}")
    return 0


def _cell(v) -> str:
    """A table cell as Markdown text: floats to 3 decimals, a literal pipe escaped (``|P − P_nuts|``
    would otherwise split the cell)."""
    return (f"{v:.3f}" if isinstance(v, float | np.floating) else str(v)).replace("|", "\\|")


def _markdown(df: pd.DataFrame) -> str:
    head = "| " + " | ".join(_cell(c) for c in df.columns) + " |\n|" + "---|" * len(df.columns)
    rows = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, *rows])


def _comparison(name: str):
    """The comparison ``crowdzoo compare NAME`` runs: a registry name, or one's own as
    ``module:object`` (importable, or a module file in the working folder) with ``run_one(seed,
    quick=...)`` → tidy DataFrame and ``summarise(df)`` → Markdown."""
    import importlib

    from ..comparisons import REGISTRY

    if name in REGISTRY:
        return name, REGISTRY[name]
    if ":" not in name:
        raise DataError(f"compare: unknown comparison {name!r}; choose one of {sorted(REGISTRY)}, or name "
                        "your own as module:object (an object with run_one(seed, quick=...) and "
                        "summarise(df))")
    module, _, attr = name.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # a module file beside the user, as `python -m` would find it
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise DataError(f"compare: cannot load {name!r}: {err}") from None
    missing = [m for m in ("run_one", "summarise") if not callable(getattr(obj, m, None))]
    if missing:
        raise DataError(f"compare: {name!r} has no {' or '.join(missing)}; a comparison needs run_one(seed, "
                        "quick=...) returning a tidy DataFrame and summarise(df) returning Markdown")
    return obj, obj


def cmd_compare(args) -> int:
    from ..comparisons import run

    what, comparison = _comparison(args.name)
    client = _dask_client(args.executor) if args.executor else None
    try:
        df, table = run(what, repeats=args.repeats, jobs=args.jobs, quick=args.quick, executor=client,
                        data_dir=args.data_dir)
    finally:
        if client is not None:
            client.close()
    print(table)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(out.with_suffix(".csv"), index=False)
        cmd = f"crowdzoo compare {args.name} --repeats {args.repeats} --jobs {args.jobs}"
        cmd += " --quick" if args.quick else ""
        cmd += f" --data-dir {args.data_dir}" if args.data_dir else ""
        fig = ""
        figure = getattr(comparison, "figure", None)
        if figure is not None:
            figure(df, out.with_suffix(".png"))
            fig = f"\n![{args.name}]({out.with_suffix('.png').name})\n"
        out.write_text(f"Made by `{cmd} --out {args.out}`.\n\n{table}\n{fig}")
    return 0


def _dask_client(address: str):
    """A ``dask.distributed.Client`` of the scheduler at ``address``, or a DataError naming --executor:
    Dask is not installed, the address is not one, or no scheduler answers there within Dask's connect
    timeout (``distributed.comm.timeouts.connect``, 30 s unless configured)."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise DataError('--executor: running on a Dask cluster needs dask.distributed: pip install '
                        '"crowdzoo[dask]" (or leave --executor out to use local processes, --jobs)') from None
    try:
        return Client(address)
    except ValueError as err:
        raise DataError(f"--executor: {address!r} is not a Dask scheduler address ({err}); give one like "
                        "tcp://HOST:8786") from None
    except OSError as err:  # Dask's connect timeout is a TimeoutError, an OSError
        raise DataError(f"--executor: no Dask scheduler answered at {address} ({err}); start one with "
                        "`dask scheduler` and give the address it prints, or leave --executor out to use "
                        "local processes") from None


def _run_settings(run_dir: Path) -> dict:
    """The settings a run was fitted with (its run.json; {} for a folder without one)."""
    f = run_dir / "run.json"
    return json.loads(f.read_text()) if f.is_file() else {}


def _decided_labels(frame: pd.DataFrame, run: dict) -> np.ndarray:
    """The label of each row of a pairs frame read with the run's columns: 1.0 where the first item
    won (every row of a winner-first file), 0.0 where the second did, NaN for a tie (y = 0.5, or the
    run's --tie-col true)."""
    from ..data.pairwise import _flags

    y_col = None if run.get("winner_first") or run.get("y_col", "y") == "" else run.get("y_col", "y")
    y = (np.ones(len(frame)) if y_col is None
         else pd.to_numeric(frame[y_col], errors="coerce").to_numpy(dtype=float, na_value=np.nan))
    tie_col = run.get("tie_col")
    tie = y == 0.5
    if tie_col and tie_col in frame:
        tie |= _flags(tie_col, frame[tie_col], lambda r: f"row {r}")
    return np.where(tie, np.nan, y)


def _held_out_rows(run_dir: Path, run: dict):
    """(p, y) of the decided ``split == test`` rows of a run's predictions.csv, or None."""
    pred = run_dir / "predictions.csv"
    if not pred.is_file():
        return None
    frame = pd.read_csv(pred, sep=run.get("sep") or ",")
    p_col, split = (_ours(name, frame.columns) for name in ("p", "split"))
    if split not in frame:
        return None
    test = frame[frame[split] == "test"]
    y = _decided_labels(test, run)
    keep = ~np.isnan(y)
    return (test[p_col].to_numpy(float)[keep], y[keep]) if keep.any() else None


def _ours(name: str, columns) -> str:
    """The column ``name`` that fit added to predictions.csv (:func:`_fresh`)."""
    return f"{name}_crowdzoo" if f"{name}_crowdzoo" in columns else name


def _test_pairs(path, run: dict):
    """Held-out labels from a CSV laid out as the run's --pairs (its separator and columns); ties are
    left out (there is no tie likelihood to score them by)."""
    e = zoo.entry(run.get("model", "gppl"))
    layout = argparse.Namespace(**{**{"a_col": "a", "b_col": "b", "y_col": "y", "sep": ","}, **run,
                                   "ties": "drop", "users": None})
    if e.data != "crowd pairs":
        layout.user_col = None
    try:
        return load_csvs(path, None, layout)[1]
    except DataError as err:
        raise DataError(_as_test(str(err))) from None


def _as_test(msg: str) -> str:
    """A message about ``--pairs`` rewritten for ``report --test`` (whose layout is the run's)."""
    msg = re.sub(r"--pairs\b", "--test", msg).replace("; set --", "; it needs the column of the run's --")
    return re.sub(r" \(pass (item|user)_features= to predict for new \w+\)",
                  lambda m: f" (the report scores the run's own {m.group(1)}s)", msg)


def write_report(run_dir: Path, out: Path, reference: Path | None = None, draws: int = 500, test=None):
    """The diagnostic report of a run folder: its posterior, held-out labels (the file ``test``,
    laid out as the run's --pairs; else the decided ``split == test`` rows of predictions.csv) and
    its run.json settings."""
    from ..diagnostics.report import report

    run = _run_settings(run_dir)
    post = _load_run(run_dir, "run_dir")
    held_out = None if test is not None else _held_out_rows(run_dir, run)
    test_data = _test_pairs(test, run) if test is not None else None
    settings = {"run": str(run_dir)}
    settings.update({f"cli.{k}": v for k, v in run.items() if v is not None and k != "func"})
    if test is not None:
        settings["held-out labels"] = f"{test} ({test_data.n_pairs} decided labels)"
    ref = _load_run(reference, "--reference") if reference else None
    try:
        return report(post, out, test=test_data, held_out=held_out, reference=ref, settings=settings,
                      n_draws=draws)
    except DataError as err:  # an id of the held-out file the fit does not know
        cols = {"a": (run.get("a_col", "a"), "the run's --a-col"),
                "b": (run.get("b_col", "b"), "the run's --b-col"),
                "users": (run.get("user_col") or "user", "the run's --user-col")}
        remedy = "the report scores held-out labels of the run's own users and items; leave those rows out"
        raise DataError(_as_test(_predict_message(err, cols, "--test", remedy))) from None


def cmd_report(args) -> int:
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise DataError(f"run_dir: not a folder: {run_dir}")
    out = Path(args.out) if args.out else run_dir / "diagnostics.html"
    rep = write_report(run_dir, out, Path(args.reference) if args.reference else None, args.draws, args.test)
    for c in rep.checks:
        print(f"{c.verdict:>5}  {c.name}: {c.value}")
    print(f"report: {rep.verdict} — written to {out}")
    return 0


def cmd_models(args) -> int:
    print(zoo.route_table(markdown=False))
    return 0


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """A warning of a CLI command as one line on stderr."""
    text = _flag_names(_cli_message(" ".join(str(message).split()), {}))
    print(f"crowdzoo: warning: {text}", file=sys.stderr)


def _launch() -> list:
    """The words that started this process: ``crowdzoo``, or torchrun's launch of it as far as
    torchrun's environment tells (processes per node and nodes; a launch on several machines must
    repeat its own rendezvous options)."""
    if "TORCHELASTIC_RUN_ID" not in os.environ or "LOCAL_WORLD_SIZE" not in os.environ:
        return ["crowdzoo"]
    local, world = int(os.environ["LOCAL_WORLD_SIZE"]), int(os.environ.get("WORLD_SIZE", "1"))
    nodes = ["--nnodes", str(world // local)] if world > local else []
    script = sys.argv[0] if os.path.basename(sys.argv[0]) == "crowdzoo" else "crowdzoo"
    return ["torchrun", *nodes, "--nproc-per-node", str(local), script]


def _interrupted(args, argv: list, err: BaseException) -> str:
    """The one line for Ctrl-C: where the fit got to, its checkpoint, the command that continues it.
    Under torchrun only rank 0 keeps the checkpoint, so only rank 0 speaks of it."""
    m = re.search(r"after iteration (\d+)", str(err))
    at = f" after iteration {m.group(1)}" if m else ""
    rank = int(os.environ.get("RANK", "0"))
    if rank:
        return f"crowdzoo: rank {rank} interrupted{at}; rank 0 says what was kept"
    ckpt = getattr(args, "checkpoint_path", None)
    if ckpt and Path(ckpt).is_file():
        rest, skip = [], False
        for a in argv:
            if skip or a == "--resume" or a.startswith("--resume="):
                skip = a == "--resume"
                continue
            rest.append(a)
        cmd = shlex.join([*_launch(), *rest, "--resume", ckpt])
        return f"crowdzoo: interrupted{at}; the fit so far is in {ckpt}; continue it with: {cmd}"
    if args.command in ("fit", "demo") and getattr(args, "method", None):
        e = zoo.entry(getattr(args, "model", "gppl"))
        if args.method in e.routes and "checkpoint" not in route_signature_static(e, args.method):
            return (f"crowdzoo: interrupted{at}; the {args.method!r} route keeps no checkpoint, so nothing "
                    "was kept")
        return f"crowdzoo: interrupted{at}, before a checkpoint was written; nothing was kept"
    return f"crowdzoo: interrupted{at}"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    args = _parser().parse_args(argv)
    handler = {"fit": cmd_fit, "demo": cmd_demo, "compare": cmd_compare, "report": cmd_report,
               "models": cmd_models, "predict": cmd_predict}[args.command]
    with warnings.catch_warnings():
        warnings.simplefilter("default", UserWarning)  # each once per command, as a line on stderr
        warnings.showwarning = _show_warning
        try:
            return handler(args)
        except DataError as err:
            print(f"crowdzoo: error: {err}", file=sys.stderr)
            return 2
        except NumericalError as err:
            print(f"crowdzoo: numerical failure: {err}", file=sys.stderr)
            return 3
        except KeyboardInterrupt as err:
            print(_interrupted(args, argv, err), file=sys.stderr)
            return 130


def entry() -> None:
    sys.exit(main())
