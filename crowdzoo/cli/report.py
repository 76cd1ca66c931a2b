"""``crowdzoo report``: the posterior diagnostic report of a run folder, with held-out labels from the
run's own split or from a file laid out as the run's ``--pairs`` (``--test``)."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from .. import zoo
from ..errors import DataError, _show
from .choices import choice_columns, read_choices, run_layout
from .messages import unseen_message
from .reading import has_counts, load_csvs
from .runs import _load_run, _run_settings


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
    """(p, y) of the decided ``split == test`` rows of a run's predictions.csv, or None; a row of counts
    (``--wins-col``, ``--losses-col``) is its wins and losses, each a label of its own, and a row's
    ``--weight-col`` is ignored (each row once)."""
    pred = run_dir / "predictions.csv"
    if not pred.is_file():
        return None
    frame = pd.read_csv(pred, sep=run.get("sep") or ",")
    p_col, split = (_ours(name, frame.columns) for name in ("p", "split"))
    if split not in frame:
        return None
    test = frame[frame[split] == "test"]
    if has_counts(argparse.Namespace(**run)):
        p = test[p_col].to_numpy(float)
        wins, losses = (test[run.get(col) or name].to_numpy(np.int64)
                        for col, name in (("wins_col", "wins"), ("losses_col", "losses")))
        y = np.r_[np.ones(wins.sum()), np.zeros(losses.sum())]
        return (np.r_[np.repeat(p, wins), np.repeat(p, losses)], y) if y.size else None
    y = _decided_labels(test, run)
    keep = ~np.isnan(y)
    return (test[p_col].to_numpy(float)[keep], y[keep]) if keep.any() else None


def _ours(name: str, columns) -> str:
    """The column ``name`` that fit added to predictions.csv (:func:`_fresh`)."""
    return f"{name}_crowdzoo" if f"{name}_crowdzoo" in columns else name


def _test_pairs(path, run: dict):
    """Held-out labels from a CSV laid out as the run's --pairs (its separator and columns); ties are
    left out, unless the run modelled them (--ties model: they are then scored three ways)."""
    e = zoo.entry(run.get("model", "gppl"))
    ties = "model" if run.get("ties") == "model" else "drop"
    layout = argparse.Namespace(**{**{"a_col": "a", "b_col": "b", "y_col": "y", "sep": ","}, **run,
                                   "ties": ties, "users": None})
    if e.data != "crowd pairs":
        layout.user_col = None
    return load_csvs(path, None, layout, flag="--test", layout="the run's ")[1]


def _test_choices(path, run: dict):
    """Held-out choices from a CSV laid out as the run's --choices (its separator and columns)."""
    return read_choices(path, run_layout(run), flag="--test", layout="the run's ", items=False)[1]


def _unseen_choice(err: DataError, run: dict) -> str:
    """A prediction's DataError on held-out choices in the command line's words: the items the run was
    not fitted on, named by the run's --item-col."""
    if not err.ids:
        return f"--test: {err.problem or err}"
    col, option = choice_columns(run_layout(run), "the run's ")["item"]
    shown = ", ".join(_show(i) for i in err.ids[:5]) + (", …" if len(err.ids) > 5 else "")
    return (f"--test, column {col!r} ({option}): {len(err.ids)} item(s) not in the fit's data ({shown}); the "
            "report scores held-out choices among the run's own items: leave those choices out")


def write_report(run_dir: Path, out: Path, reference: Path | None = None, draws: int = 500, test=None):
    """The diagnostic report of a run folder: its posterior, held-out labels (the file ``test``,
    laid out as the run's --pairs; else the decided ``split == test`` rows of predictions.csv) and
    its run.json settings."""
    from ..diagnostics.report import report

    run = _run_settings(run_dir)
    post = _load_run(run_dir, "run_dir")
    choices = run.get("choices") is not None
    held_out = None if test is not None or choices else _held_out_rows(run_dir, run)
    test_data = None if test is None else _test_choices(test, run) if choices else _test_pairs(test, run)
    settings = {"run": str(run_dir)}
    settings.update({f"cli.{k}": v for k, v in run.items() if v is not None and k != "func"})
    if test is not None:
        settings["held-out labels"] = (f"{test} ({test_data.n_rows} choices)" if choices else
                                       f"{test} ({test_data.n_pairs} decided labels)")
    ref = _load_run(reference, "--reference") if reference else None
    try:
        return report(post, out, test=test_data, held_out=held_out, reference=ref, settings=settings,
                      n_draws=draws)
    except DataError as err:  # an id of the held-out file the fit does not know
        if choices:
            raise DataError(_unseen_choice(err, run), arg="--test", ids=err.ids) from None
        cols = {"a": (run.get("a_col", "a"), "the run's --a-col"),
                "b": (run.get("b_col", "b"), "the run's --b-col"),
                "users": (run.get("user_col") or "user", "the run's --user-col")}
        remedy = "the report scores held-out labels of the run's own users and items; leave those rows out"
        raise DataError(unseen_message(err, cols, "--test", remedy), arg="--test", row=err.row,
                        ids=err.ids) from None


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
