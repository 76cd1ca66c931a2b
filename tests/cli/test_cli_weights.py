"""The command line's weighted pairs: a file of counts per pair (``--wins-col``, ``--losses-col``,
``--ties-col``) fits as the file with one row per label, writes predictions.csv with one row per input
row and weighted training scores; a weight per row (``--weight-col``); and the errors in the command
line's words (the flag, the column and the row)."""
import json

import numpy as np
import pandas as pd
import pytest

import crowdzoo as cz
from crowdzoo.cli import main

COUNTS = pd.DataFrame({"first": ["p", "q", "r", "p", "q", "s"], "second": ["q", "r", "s", "s", "s", "p"],
                       "won": [5, 2, 0, 3, 1, 2], "lost": [1, 2, 3, 0, 1, 0], "draws": [2, 0, 1, 0, 2, 1]})
LAYOUT = ["--a-col", "first", "--b-col", "second"]
COUNT_FLAGS = ["--wins-col", "won", "--losses-col", "lost", "--ties-col", "draws"]
QUICK = ["--method", "map", "--max-iter", "200", "--no-progress"]


def _one_row_per_label(counts: pd.DataFrame) -> pd.DataFrame:
    rows = [(r.first, r.second, y) for r in counts.itertuples()
            for y, n in ((1.0, r.won), (0.0, r.lost), (0.5, r.draws)) for _ in range(n)]
    return pd.DataFrame(rows, columns=["first", "second", "y"])


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("crowdzoo: error:") and "Traceback" not in err, err
    return err


def test_a_file_of_counts_fits_as_its_rows_and_predicts_one_row_per_row(tmp_path):
    COUNTS.to_csv(tmp_path / "counts.csv", index=False)
    _one_row_per_label(COUNTS).to_csv(tmp_path / "long.csv", index=False)
    counted, long = tmp_path / "counted", tmp_path / "long"
    assert main(["fit", "bradley-terry", "--pairs", tmp_path / "counts.csv", *LAYOUT, *COUNT_FLAGS, "--ties",
                 "half", *QUICK, "--out", counted]) == 0
    assert main(["fit", "bradley-terry", "--pairs", tmp_path / "long.csv", *LAYOUT, "--ties", "half", *QUICK,
                 "--out", long]) == 0
    u = [pd.read_csv(run / "utilities.csv").set_index("item")["mean"].sort_index() for run in (counted, long)]
    np.testing.assert_allclose(u[0].to_numpy(), u[1].to_numpy(), rtol=0, atol=1e-8)
    pred = pd.read_csv(counted / "predictions.csv")
    assert len(pred) == len(COUNTS) and list(pred.columns) == [*COUNTS.columns, "p"]
    assert (pred[list(COUNTS.columns)] == COUNTS).all().all()  # the user's rows, in order, as they were
    post = cz.load(counted / "posterior.pt")
    np.testing.assert_allclose(pred["p"], post.predict_proba(COUNTS["first"], COUNTS["second"]), atol=1e-12)
    # the training scores count each row's wins and losses (its ties are neither hits nor misses)
    metrics = json.loads((counted / "metrics.json").read_text())
    p = pred["p"].to_numpy()
    y = np.r_[np.ones(len(p)), np.zeros(len(p))]
    w = np.r_[COUNTS["won"], COUNTS["lost"]].astype(float)
    pp = np.r_[p, p]
    assert metrics["train_scored_weight"] == w.sum() and metrics["train_scored_rows"] == len(COUNTS)
    assert metrics["train_cee"] == pytest.approx(-np.average(y * np.log(pp) + (1 - y) * np.log1p(-pp),
                                                             weights=w), rel=1e-9)
    assert metrics["train_accuracy"] == pytest.approx(np.average((pp > 0.5) == (y == 1), weights=w))


def test_counts_with_ties_modelled_and_a_held_out_share(tmp_path):
    COUNTS.to_csv(tmp_path / "counts.csv", index=False)
    run = tmp_path / "run"
    assert main(["fit", "bradley-terry", "--pairs", tmp_path / "counts.csv", *LAYOUT, *COUNT_FLAGS, "--ties",
                 "model", "--test-fraction", "0.34", *QUICK, "--out", run]) == 0
    pred = pd.read_csv(run / "predictions.csv")
    assert len(pred) == len(COUNTS) and {"p", "p_tie", "split"} <= set(pred.columns)
    assert sorted(pred["split"].unique()) == ["test", "train"]
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["train_cee_3way"] is not None
    assert metrics["test_scored_rows"] == (pred["split"] == "test").sum()
    # the report scores the held-out rows' wins and losses, and a file of counts laid out as the run's
    COUNTS.to_csv(tmp_path / "more.csv", index=False)
    for extra in ([], ["--test", tmp_path / "more.csv"]):
        assert main(["report", run, "--draws", "50", "--out", tmp_path / "report.html", *extra]) == 0


def test_a_weight_per_row(tmp_path):
    long = _one_row_per_label(COUNTS[["first", "second", "won", "lost"]].assign(draws=0))
    weighted = long.groupby(["first", "second", "y"], as_index=False).size().rename(columns={"size": "n"})
    weighted.to_csv(tmp_path / "weighted.csv", index=False)
    long.to_csv(tmp_path / "long.csv", index=False)
    runs = [tmp_path / "weighted", tmp_path / "long"]
    assert main(["fit", "gppl", "--pairs", tmp_path / "weighted.csv", *LAYOUT, "--weight-col", "n",
                 "--method", "ep", "--n-grid", "5", "--no-progress", "--out", runs[0]]) == 0
    assert main(["fit", "gppl", "--pairs", tmp_path / "long.csv", *LAYOUT, "--method", "ep", "--n-grid", "5",
                 "--no-progress", "--out", runs[1]]) == 0
    u = [pd.read_csv(run / "utilities.csv").set_index("item")["mean"].sort_index() for run in runs]
    np.testing.assert_allclose(u[0].to_numpy(), u[1].to_numpy(), rtol=0, atol=1e-8)
    m = [json.loads((run / "metrics.json").read_text()) for run in runs]
    assert m[0]["train_cee"] == pytest.approx(m[1]["train_cee"], rel=1e-9)
    assert m[0]["train_scored_weight"] == len(long) and m[0]["train_scored_rows"] == len(weighted)
    assert len(pd.read_csv(runs[0] / "predictions.csv")) == len(weighted)


def test_bad_counts_and_weights_are_named_by_flag_column_and_row(tmp_path, capsys):
    def fit(frame, *flags):
        frame.to_csv(tmp_path / "pairs.csv", index=False)
        out = tmp_path / "run"
        return main(["fit", "bradley-terry", "--pairs", tmp_path / "pairs.csv", *LAYOUT, *flags, *QUICK,
                     "--out", out, "--overwrite"])

    assert fit(COUNTS.assign(lost=[1, -2, 3, 0, 1, 0]), *COUNT_FLAGS, "--ties", "half") == 2
    assert "--pairs, column 'lost' (--losses-col), row 1: -2 is not a count" in _error(capsys)
    assert fit(COUNTS, *COUNT_FLAGS) == 2
    err = _error(capsys)
    assert "--pairs, row 0: 2 tie(s) in column 'draws'" in err and "--ties half" in err
    assert fit(COUNTS.assign(won=0, lost=0, draws=[0, 1, 1, 1, 1, 1]), *COUNT_FLAGS, "--ties", "half") == 2
    assert "--pairs, row 0: every count ('won', 'lost', 'draws') is 0" in _error(capsys)
    assert fit(COUNTS.drop(columns="won"), "--losses-col", "lost") == 2
    assert "column 'wins' (--wins-col) not found" in _error(capsys)
    long = _one_row_per_label(COUNTS).assign(w=1.0)
    long.loc[3, "w"] = 0
    assert fit(long, "--weight-col", "w", "--ties", "half") == 2
    assert "--pairs, column 'w' (--weight-col), row 3: 0.0 is not a weight" in _error(capsys)
    for flags, named in ((["--weight-col", "w"], "--weight-col"), (["--tie-col", "t"], "--tie-col"),
                         (["--y-col", "label"], "--y-col"), (["--winner-first"], "--winner-first")):
        assert fit(COUNTS, *COUNT_FLAGS, *flags) == 2
        assert _error(capsys).startswith(f"crowdzoo: error: {named}: not with --wins-col, --losses-col or "
                                         "--ties-col")
