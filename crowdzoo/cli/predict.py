"""``crowdzoo predict``: P(a ≻ b) for new pairs from a run of a preference model, P(chosen) for the
members of new choice sets (``--choices``), or the clusters of new items from a run of a links model,
reading the columns the run used (its run.json)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .. import zoo
from ..errors import DataError, _show
from .choices import choice_columns, predict_rows, run_layout, takers
from .links import cluster_table, is_links, links_models
from .messages import unseen_message
from .reading import ITEMS, _need_columns, _read_csv, _sep_hint, _table_features
from .runs import _load_run, _run_settings, check_out_file, write_result


def cmd_predict(args) -> int:
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise DataError(f"run_dir: not a folder: {run_dir}")
    run = _run_settings(run_dir)
    e = zoo.entry(run.get("model", "gppl"))
    if getattr(args, "choices", None) is not None:
        return predict_choices(args, run_dir, run, e)
    if e.data == "links" or args.items is not None or args.pairs is None:
        _check_links_run(args, run_dir, run)
        return predict_clusters(args, run_dir, run)
    return predict_pairs(args, run_dir, run, e)


def predict_pairs(args, run_dir: Path, run: dict, e) -> int:
    """``crowdzoo predict RUN --pairs NEW.csv``: P(a ≻ b) of each row, by the row's user for crowd
    models (unless --consensus); a user the run was not fitted on as --unknown-users says."""
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
        extra = {}
        if getattr(post, "tau", None) is not None:  # a fit that models ties: p given no tie, and P(tie)
            extra["p_tie"] = post.predict_outcomes(pairs[a_col].to_numpy(), pairs[b_col].to_numpy(),
                                                   **kw)["p_tie"].to_numpy()
    except DataError as err:
        raise DataError(unseen_message(err, cols), arg="--pairs", row=err.row, ids=err.ids) from None
    write_result(pairs.assign(p=p, **extra), args.out, sep, "P(a ≻ b) of {n} pairs")
    return 0


def predict_choices(args, run_dir: Path, run: dict, e) -> int:
    """``crowdzoo predict RUN --choices NEW.csv``: each row's P(its item is chosen as best from its
    choice's set), reading the run's --choice-col and --item-col (the Python API's defaults for a run
    fitted on --pairs), for a model with one utility per item."""
    for given, flag in ((args.pairs, "--pairs"), (args.items, "--items")):
        if given is not None:
            raise DataError(f"{flag}: not with --choices; predict one file at a time", arg=flag)
    if e.data == "links" or zoo.takes_users(e):
        what = "clusters items" if e.data == "links" else "predicts each user's preferences"
        raise DataError(f"--choices: {run_dir} is a {e.name} run, which {what}; --choices predicts choices "
                        "for models with one utility per item (those that take --choices when fitted: "
                        f"{takers()})", arg="--choices")
    layout = run_layout(run)
    sep = args.sep or layout.sep
    layout.sep = sep
    frame = _read_csv(args.choices, "--choices", sep)
    cols = choice_columns(layout, "the run's ")
    _need_columns(frame, args.choices, "--choices", {cols[k][0]: cols[k][1] for k in ("choice", "item")},
                  settable=False)
    if len(frame) == 0:
        raise DataError(f"--choices: {args.choices} has a header but no rows (no choices)", arg="--choices")
    check_out_file(args)
    post = _load_run(run_dir, "run_dir")
    try:
        p = predict_rows(post, frame, layout)
    except NotImplementedError:
        raise DataError(f"--choices: {run_dir}'s {e.name} posterior has no choice predictions",
                        arg="--choices") from None
    write_result(frame.assign(p=p), args.out, sep, "P(chosen) of {n} rows")
    return 0


def _check_links_run(args, run_dir: Path, run: dict) -> None:
    """A links run takes --items and nothing of pairs; a pairs run needs --pairs, not --items."""
    model = run.get("model", "gppl")
    if not is_links(model):
        if args.items is not None:
            raise DataError(f"--items: {run_dir} is a {model} run, which predicts preferences: give --pairs "
                            f"NEW.csv (--items is for runs of the links models, {', '.join(links_models())})")
        raise DataError(f"--pairs: {run_dir} is a {model} run: give --pairs NEW.csv, with the run's --a-col "
                        "and --b-col columns")
    if args.pairs is not None:
        raise DataError(f"--pairs: {run_dir} is a {model} run, which clusters items: give --items NEW.csv, "
                        "with the run's id and feature columns")
    if args.items is None:
        raise DataError(f"--items: {run_dir} is a {model} run: give --items NEW.csv, with the run's id and "
                        "feature columns")
    if args.consensus:
        raise DataError(f"--consensus: {model} has no users; drop it")


def predict_clusters(args, run_dir: Path, run: dict) -> int:
    """``crowdzoo predict RUN --items NEW.csv`` for a links run: each new item's most probable cluster
    and its probability, from the run's networks (without links: new items have none)."""
    sep = args.sep or run.get("sep") or ","
    check_out_file(args)
    raw = _read_csv(args.items, "--items", sep)
    id_col = run.get("id_col") or "id"
    wanted = {id_col: "the run's --id-col"}
    wanted.update({c: "a feature column of the run" for c in run.get("item_columns", [])})
    for col, what in wanted.items():
        if col not in raw.columns:
            raise DataError(f"--items: column {col!r} ({what}) not found in {args.items} (columns: "
                            f"{list(raw.columns)}){_sep_hint(raw)}")
    if len(raw) == 0:
        raise DataError(f"--items: {args.items} has a header but no rows (no items to cluster)")
    feats = _table_features(raw.set_index(id_col), args.items, ITEMS,
                            ",".join(run.get("item_columns", [])) or None, run.get("one_hot"))
    known = run.get("feature_columns") or list(feats.columns)
    for c in feats.columns:
        if c not in known:  # a one-hot category the run never saw
            col, _, value = str(c).partition("=")
            r = int(np.flatnonzero(feats[c].to_numpy() == 1)[0])
            raise DataError(f"--items: column {col!r}, row {r} (item {_show(feats.index[r])}): category "
                            f"{value!r} was not in the run's items, so the run has no feature for it")
    X = feats.reindex(columns=known, fill_value=0.0).to_numpy(dtype=np.float64)
    bad = np.argwhere(~np.isfinite(X))
    if bad.size:
        r, c = bad[0]
        raise DataError(f"--items: row {r} (item {_show(feats.index[r])}), column {known[c]!r}: value "
                        f"{X[r, c]} is not finite (missing, NaN or inf)")
    post = _load_run(run_dir, "run_dir")
    probs = post.cluster_proba(X).to_numpy(dtype=np.float64)
    write_result(cluster_table(probs, feats.index, id_col), args.out, sep, "clusters of {n} items")
    return 0
