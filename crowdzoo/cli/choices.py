"""Choices among k items on the command line: ``crowdzoo fit MODEL --choices FILE.csv`` reads the long
layout of :meth:`~crowdzoo.ChoiceData.from_frame` (one row per (choice, item offered)), for the models
and routes that the zoo's table says take choices (``Entry.choices``); every other model or route is
refused naming the flag. ``crowdzoo predict RUN --choices NEW.csv`` writes each row's probability of
being chosen as best, ``crowdzoo report RUN --test CHOICES.csv`` calibrates held-out choices.

    crowdzoo fit bradley-terry --choices survey.csv --choice-col task --item-col claim \\
        --chosen-col best --worst-col worst --out runs/survey
    crowdzoo predict runs/survey --choices screens.csv -o screens_p.csv

The columns' defaults are the Python API's (those of ``ChoiceData.from_frame``, read from its source
so that ``--help`` needs no torch). Nothing here imports torch until a fit or a prediction runs.
"""
from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from .. import zoo
from ..errors import DataError, _show
from .flags import method_defaults_static
from .messages import cli_message
from .reading import WEIGHT_OPTIONS, _items_table, _need_columns, _read_csv, _users_table

#: the options that name the columns of --choices: {argument of ChoiceData.from_frame: (dest, flag)}
CHOICE_COLUMNS = {"choice": ("choice_col", "--choice-col"), "item": ("item_col", "--item-col"),
                  "chosen": ("chosen_col", "--chosen-col"), "worst": ("worst_col", "--worst-col")}
#: options of a pairs fit that have no meaning for choices: {dest: flag}
PAIRS_ONLY = {"pairs": "--pairs", "winner_first": "--winner-first", "tie_col": "--tie-col", "ties": "--ties",
              "test_fraction": "--test-fraction", **WEIGHT_OPTIONS}
#: the columns of a pairs file, with their parser defaults (given otherwise, they are refused)
PAIR_COLUMNS = {"a_col": ("--a-col", "a"), "b_col": ("--b-col", "b"), "y_col": ("--y-col", "y")}


def api_defaults() -> dict:
    """The columns ``ChoiceData.from_frame`` reads by default, {argument: column or None}."""
    d = method_defaults_static("crowdzoo.data.choices", "ChoiceData", "from_frame")
    return {arg: d.get(arg) for arg in CHOICE_COLUMNS}


def takers() -> str:
    """The models and routes that take choices, from the zoo's table: "bradley-terry (--method map,
    svi, nuts); gppl (--method svi, nuts)"."""
    return "; ".join(f"{x.name} (--method {', '.join(x.choices)})" for x in zoo.ZOO if x.choices)


def choice_columns(args, layout: str = "") -> dict:
    """{argument of ``from_frame``: (the user's column, the option that names it)} for the columns a
    choices file has under ``args`` (the Python API's defaults where an option is not given; the worst
    only where named; the user for crowd models). ``layout``: words before each option ("the run's ")."""
    default = api_defaults()
    out = {}
    for arg, (dest, flag) in CHOICE_COLUMNS.items():
        col = getattr(args, dest, None) or default[arg]
        if col:
            out[arg] = (col, layout + flag)
    e = zoo.entry(getattr(args, "model", "gppl"))
    if zoo.takes_users(e):
        out["user"] = (getattr(args, "user_col", None) or "user", layout + "--user-col")
    return out


def check_fit_options(args, e) -> None:
    """A fit with --choices: no option of pairwise labels, and a model and route whose likelihood takes
    choices (the zoo table's ``choices``); sets ``args.method`` to the model's first such route where
    --method is not given (as ``crowdzoo.fit`` chooses)."""
    for dest, flag in PAIRS_ONLY.items():
        if getattr(args, dest, None):
            what = ("give either --pairs (pairwise labels) or --choices (choices among k items), not both"
                    if dest == "pairs" else f"{flag} is for pairwise labels (--pairs)")
            raise DataError(f"{flag}: not with --choices; {what}", arg=flag)
    for dest, (flag, default) in PAIR_COLUMNS.items():
        if getattr(args, dest, default) != default:
            raise DataError(f"{flag}: names a column of --pairs; the columns of --choices are "
                            f"{', '.join(f for _, f in CHOICE_COLUMNS.values())}", arg=flag)
    if not e.choices:
        raise DataError(f"--choices: {e.name} has no likelihood of choices among k items; the models that "
                        f"take --choices: {takers()}; or give the choices as pairwise labels with --pairs "
                        "(the chosen item preferred to each other member)", arg="--choices")
    args.method = args.method or e.choices[0]
    if args.method not in e.choices:
        raise DataError(f"--choices: {e.name}'s {args.method!r} route has no likelihood of choices among k "
                        f"items; fit it with --method {e.choices[0]} (its routes with choices: "
                        f"{', '.join(e.choices)})", arg="--choices")


def check_no_choice_options(args) -> None:
    """A fit of pairs: the options that name columns of --choices need --choices."""
    for dest, flag in CHOICE_COLUMNS.values():
        if getattr(args, dest, None) is not None:
            raise DataError(f"{flag}: applies to --choices, which was not given", arg=flag)


def places(flag: str, cols: dict) -> dict:
    """Where the arguments of ``ChoiceData.from_frame`` live when the choices come from the file
    ``flag``: its columns (and the options that name them), --items and --users."""
    out = {"df": flag, "sets": flag, "rows": flag, "items": "--items", "item_features": "--items",
           "item_ids": "--items", "users": "--users", "user_features": "--users"}
    out.update({arg: f"{flag}, column {col!r} ({option})" for arg, (col, option) in cols.items()})
    return out


def read_choices(path, args, flag: str = "--choices", layout: str = "", items=True):
    """(the frame of ``path``, ChoiceData) read with ``args``' columns and separator, with --items (item
    features; ``items=False``: none, the ids seen) and, for crowd models, --users. The data API's errors
    come back naming the flag, the user's column and the row."""
    from ..data import ChoiceData

    sep = getattr(args, "sep", None) or ","
    cols = choice_columns(args, layout)
    frame = _read_csv(path, flag, sep)
    _need_columns(frame, path, flag, dict(cols.values()), settable=not layout)
    if len(frame) == 0:
        raise DataError(f"{flag}: {path} has a header but no rows (no choices)", arg=flag)
    kw = {arg: col for arg, (col, _) in cols.items()}
    if "user" in kw:
        kw["users"] = _users_table(args, sep)
    table = _items_table(getattr(args, "items", None), args, sep) if items else None
    try:
        return frame, ChoiceData.from_frame(frame, table, **kw)
    except DataError as err:
        raise DataError(cli_message(err, places(flag, cols), None, flag), arg=flag, row=err.row,
                        ids=err.ids) from None


def line_slots(frame: pd.DataFrame, choice_col: str):
    """(choice, slot) of each row of a long-layout frame, as ``ChoiceData.from_frame`` numbers them:
    choices in order of their first row, members in row order within a choice."""
    codes, _ = pd.factorize(frame[choice_col].to_numpy())
    return codes, pd.Series(codes).groupby(codes).cumcount().to_numpy()


def member_probabilities(post, data) -> np.ndarray:
    """(R, k_max): each member's probability of being chosen as best, for the sets of ``data``."""
    ids = np.asarray(data.item_ids)
    kw = {"users": np.asarray(data.user_ids)[data.users]} if data.users is not None else {}
    return post.predict_choice([ids[row[row >= 0]] for row in data.sets], **kw)


def write_predictions(path, frame: pd.DataFrame, data, post, args) -> dict:
    """predictions.csv of a choices fit: the rows of --choices in their order, with their own columns
    and separator, plus ``p`` = P(this row's item is chosen as best from its choice's set). Returns the
    training scores: ``train_cee``, the mean −log P(the chosen item) over the choices, and
    ``train_accuracy``, the share of choices whose most probable member was chosen."""
    from .outputs import _fresh

    P = member_probabilities(post, data)
    codes, slot = line_slots(frame, choice_columns(args)["choice"][0])
    rows = np.arange(data.n_rows)
    chosen = P[rows, data.best]
    frame.assign(**{_fresh("p", frame.columns): P[codes, slot]}).to_csv(path, sep=args.sep, index=False)
    return {"train_scored_choices": int(data.n_rows),
            "train_accuracy": float((P.argmax(1) == data.best).mean()),
            "train_cee": float(-np.log(np.clip(chosen, 1e-15, 1.0)).mean())}


def run_layout(run: dict) -> argparse.Namespace:
    """A run's columns of --choices and its separator, from its run.json."""
    return argparse.Namespace(**{"sep": ",", **run, "items": None, "users": None})


def predict_rows(post, frame: pd.DataFrame, layout, flag: str = "--choices") -> np.ndarray:
    """P(each row's item is chosen as best from its choice's set) for a long-layout frame read with a
    run's columns (the chosen column is not needed). An item the run was not fitted on, a choice of
    fewer than two items or an item offered twice in a choice is named by its column and row."""
    cols = choice_columns(layout, "the run's ")
    (choice_col, choice_opt), (item_col, item_opt) = cols["choice"], cols["item"]
    codes, slot = line_slots(frame, choice_col)
    items = frame[item_col].to_numpy(dtype=object)
    known = pd.Index(post.data.item_ids).get_indexer(items) >= 0
    if not known.all():
        bad = np.flatnonzero(~known)
        shown = ", ".join(_show(i) for i in pd.unique(items[bad])[:5])
        raise DataError(f"{flag}, column {item_col!r} ({item_opt}): row {bad[0]}: item "
                        f"{_show(items[bad[0]])} was not in the fit's data ({bad.size} row(s): {shown}); the "
                        "run can predict only the items it was fitted on", arg=flag, row=int(bad[0]))
    R = int(codes.max()) + 1
    order = np.lexsort((slot, codes))  # by choice, members in row order
    sets = np.split(items[order], np.cumsum(np.bincount(codes, minlength=R))[:-1])
    first = np.full(R, len(frame))
    np.minimum.at(first, codes, np.arange(len(frame)))
    try:
        P = post.predict_choice(sets)
    except DataError as err:
        if err.row is None:
            raise
        r = int(first[err.row])
        raise DataError(f"{flag}, column {choice_col!r} ({choice_opt}): row {r}: choice "
                        f"{_show(frame[choice_col].iloc[r])}: {err.problem or err}", arg=flag,
                        row=r) from None
    return P[codes, slot]
