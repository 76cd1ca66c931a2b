"""The command line on files laid out the way a user keeps them: string ids, ';' as separator, the
winner first with no label column, a yes/no tie column, and a users table with a yes/no column.
Users' features and one-hot columns, one-hot refusing a measurement, predictions.csv row for row
beside --pairs, collabGP's utilities.csv, `report --test`, and the report's feature switches. Every
command goes through ``crowdzoo.cli.main`` in-process, with tiny fits, and leaves the input files as
they were, byte for byte."""
import json

import numpy as np
import pandas as pd
import pytest

import crowdzoo as cz
from crowdzoo.cli import main

BEANS = [f"bean_{c}" for c in "abcdefghijkl"]
TASTERS = ["ann", "bob", "cy", "dee", "eve", "fay", "gus", "hal", "ida", "jo", "kit", "lu"]
LAYOUT = ["--sep", ";", "--a-col", "winner", "--b-col", "loser", "--winner-first", "--tie-col", "tie"]
ITEMS = ["--id-col", "bean", "--one-hot", "origin"]
CROWD = ["--user-col", "taster", "--components", "2", "--method", "natgrad", "--max-iter", "5",
         "--no-progress"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """beans.csv (bean; origin; altitude_m: 12 distinct heights; roast), tasters.csv (taster; age;
    barista: yes/no; city), pairs.csv (taster; winner; loser; tie: yes/no; 72 rows, 6 ties) and
    holdout.csv (the same layout, 24 rows, 2 ties)."""
    d = tmp_path_factory.mktemp("coffee")
    rng = np.random.default_rng(0)
    beans = pd.DataFrame({"bean": BEANS, "origin": ["kenya", "peru", "brazil"] * 4,
                          "altitude_m": 900 + 100 * rng.permutation(12), "roast": [1, 2, 3] * 4})
    tasters = pd.DataFrame({"taster": TASTERS, "age": 20 + 3 * np.arange(12),
                            "barista": ["yes", "no", "No", "YES"] * 3, "city": ["york", "leeds"] * 6})
    f = dict(zip(BEANS, 0.002 * (beans.altitude_m - 1400) + rng.normal(0, 0.5, 12), strict=True))

    def pairs(n, seed):
        r = np.random.default_rng(seed)
        rows = []
        for k in range(n):
            i, j = r.choice(BEANS, 2, replace=False)
            w, lo = (i, j) if f[i] - f[j] + r.normal(0, 0.5) > 0 else (j, i)
            rows.append({"taster": TASTERS[k % 12], "winner": w, "loser": lo,
                         "tie": "yes" if k % 12 == 5 else "no"})
        return pd.DataFrame(rows)

    beans.to_csv(d / "beans.csv", sep=";", index=False)
    tasters.to_csv(d / "tasters.csv", sep=";", index=False)
    pairs(72, 1).to_csv(d / "pairs.csv", sep=";", index=False)
    pairs(24, 2).to_csv(d / "holdout.csv", sep=";", index=False)
    return d


@pytest.fixture
def unchanged(files):
    """After the test: every input file holds the bytes it held before."""
    before = {p.name: p.read_bytes() for p in files.glob("*.csv")}
    yield
    assert {p.name: p.read_bytes() for p in files.glob("*.csv")} == before


def _pairs(d, name="pairs.csv"):
    return ["--pairs", str(d / name), "--items", str(d / "beans.csv"), *ITEMS, *LAYOUT]


def _error(capsys) -> str:
    """The one error line of the last command (earlier commands' warnings and summaries before it)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.rstrip().splitlines()[-1].startswith("crowdzoo: error:"), err
    err = err.rstrip().splitlines()[-1]
    assert "frame[" not in err and "pd.get_dummies" not in err, err  # no Python advice
    return err


@pytest.fixture(scope="module")
def crowd_run(files, tmp_path_factory):
    """crowdGPPL fitted without --users, a quarter of the rows held out, ties counted half each way."""
    run = tmp_path_factory.mktemp("runs") / "crowd"
    assert main(["fit", "crowdgppl", *_pairs(files), *CROWD, "--ties", "half", "--test-fraction", "0.25",
                 "--out", str(run)]) == 0
    return run


# ---------------------------------------------------------------- users' features
def test_users_table_with_yes_no_and_one_hot_columns(files, tmp_path, capsys, unchanged):
    users = ["--users", str(files / "tasters.csv"), "--user-id-col", "taster"]
    run = tmp_path / "run"
    assert main(["fit", "crowdgppl", *_pairs(files), *users, "--user-one-hot", "city", *CROWD,
                 "--ties", "drop", "--out", str(run)]) == 0
    X = cz.load(run / "posterior.pt").data.user_features
    assert X.shape == (12, 1 + 1 + 2)  # age, barista as 1/0, city one-hot
    np.testing.assert_array_equal(X[:, 1], [1, 0, 0, 1] * 3)
    run2 = tmp_path / "run2"
    assert main(["fit", "crowdgppl", *_pairs(files), *users, "--user-features", "barista", *CROWD,
                 "--ties", "drop", "--out", str(run2)]) == 0
    assert cz.load(run2 / "posterior.pt").data.user_features.shape == (12, 1)
    # a string column that is no yes/no: its message names the users' flags
    assert main(["fit", "crowdgppl", *_pairs(files), *users, *CROWD, "--ties", "drop",
                 "--out", str(tmp_path / "o")]) == 2
    err = _error(capsys)
    assert "--users" in err and "'city'" in err and "--user-one-hot city" in err
    assert "--user-features 'age,barista'" in err
    # the items' flags name the items' table; the users' flags need --users
    assert main(["fit", "crowdgppl", *_pairs(files), *users, "--one-hot", "origin,barista", *CROWD,
                 "--ties", "drop", "--out", str(tmp_path / "o")]) == 2
    assert "--one-hot: column 'barista' not in --items" in _error(capsys)
    assert main(["fit", "crowdgppl", *_pairs(files), "--user-one-hot", "city", *CROWD, "--ties", "drop",
                 "--out", str(tmp_path / "o")]) == 2
    assert "--user-one-hot: applies to --users" in _error(capsys)
    assert main(["fit", "gppl", *_pairs(files), "--user-features", "age", "--ties", "drop",
                 "--out", str(tmp_path / "o")]) == 2
    assert "--user-features" in _error(capsys)
    assert not (tmp_path / "o").exists()


def test_one_hot_refuses_a_measurement(files, tmp_path, capsys, unchanged):
    assert main(["fit", "gppl", *_pairs(files), "--one-hot", "origin,altitude_m", "--ties", "drop",
                 "--out", str(tmp_path / "o")]) == 2
    err = _error(capsys)
    assert "--one-hot: column 'altitude_m'" in err and "12 distinct values" in err and "--features" in err
    users = ["--users", str(files / "tasters.csv"), "--user-id-col", "taster"]
    assert main(["fit", "crowdgppl", *_pairs(files), *users, "--user-one-hot", "age,city", *CROWD,
                 "--ties", "drop", "--out", str(tmp_path / "o")]) == 2
    err = _error(capsys)
    assert "--user-one-hot: column 'age'" in err and "--user-features" in err
    # a numeric column of few values is a category: roast takes three
    assert main(["fit", "gppl", *_pairs(files), "--id-col", "bean", "--one-hot", "origin,roast",
                 "--ties", "drop", "--max-iter", "5", "--no-progress", "--out", str(tmp_path / "r")]) == 0
    assert cz.load(tmp_path / "r" / "posterior.pt").data.item_features.shape == (12, 3 + 1 + 3)


# ---------------------------------------------------------------- predictions.csv beside --pairs
def test_predictions_line_up_with_the_pairs_file(files, crowd_run, unchanged):
    given = pd.read_csv(files / "pairs.csv", sep=";")
    pred = pd.read_csv(crowd_run / "predictions.csv", sep=";")
    assert list(pred.columns) == [*given.columns, "p", "split"]
    pd.testing.assert_frame_equal(pred[given.columns], given)  # row for row, the user's own values
    post = cz.load(crowd_run / "posterior.pt")
    np.testing.assert_allclose(pred["p"], post.predict_proba(given["winner"], given["loser"],
                                                             users=given["taster"]), rtol=1e-12)
    assert set(pred["split"]) == {"train", "test"}
    metrics = json.loads((crowd_run / "metrics.json").read_text())
    tie = given["tie"] == "yes"
    assert metrics["n_rows"] == 72 and metrics["n_ties"] == tie.sum() == 6
    train = pred["split"] == "train"
    assert metrics["n_pairs"] == (train & ~tie).sum() + 2 * (train & tie).sum()  # a tie: a label each way
    for split in ("train", "test"):  # accuracy and log loss over the decided rows (winner first: y = 1)
        p = pred["p"][(pred["split"] == split) & ~tie]
        assert metrics[f"{split}_scored_rows"] == len(p)
        assert metrics[f"{split}_accuracy"] == pytest.approx((p > 0.5).mean())
        assert metrics[f"{split}_cee"] == pytest.approx(-np.log(p).mean())


def test_predictions_with_a_label_column_and_dropped_ties(files, tmp_path, unchanged):
    given = pd.read_csv(files / "pairs.csv", sep=";")
    flip = np.arange(len(given)) % 3 == 0  # some rows written loser first, y = 0
    table = given.assign(first=np.where(flip, given["loser"], given["winner"]),
                         second=np.where(flip, given["winner"], given["loser"]),
                         y=np.where(given["tie"] == "yes", 0.5, np.where(flip, 0, 1)))[
        ["first", "second", "y", "taster"]]
    table.to_csv(tmp_path / "labels.csv", index=False)
    run = tmp_path / "run"
    assert main(["fit", "gppl", "--pairs", str(tmp_path / "labels.csv"), "--a-col", "first", "--b-col",
                 "second", "--ties", "drop", "--test-fraction", "0.3", "--max-iter", "5", "--no-progress",
                 "--out", str(run)]) == 0
    pred = pd.read_csv(run / "predictions.csv")
    assert list(pred.columns) == ["first", "second", "y", "taster", "p", "split"]
    pd.testing.assert_frame_equal(pred[table.columns], pd.read_csv(tmp_path / "labels.csv"))
    assert (pred["split"][pred["y"] == 0.5] == "dropped").all() and (pred["split"] != "dropped").sum() == 66
    post = cz.load(run / "posterior.pt")
    np.testing.assert_allclose(pred["p"], post.predict_proba(pred["first"], pred["second"]), rtol=1e-12)
    metrics = json.loads((run / "metrics.json").read_text())
    test = pred[pred["split"] == "test"]
    assert metrics["test_accuracy"] == pytest.approx(((test["p"] > 0.5) == (test["y"] == 1)).mean())


# ---------------------------------------------------------------- utilities.csv of every model
def test_collabgp_writes_utilities(files, tmp_path, unchanged):
    run = tmp_path / "collab"
    assert main(["fit", "collabgp", *_pairs(files), "--user-col", "taster", "--ties", "half",
                 "--max-iter", "5", "--no-progress", "--out", str(run)]) == 0
    util = pd.read_csv(run / "utilities.csv")
    assert list(util.columns) == ["item", "mean", "p_win"] and sorted(util["item"]) == BEANS
    assert util["mean"].is_monotonic_decreasing and util["p_win"].between(0, 1).all()
    assert abs(util["mean"].mean()) < 1e-8  # each item against every other: the mean item scores 0


# ---------------------------------------------------------------- report
def test_report_scores_a_test_file_with_the_runs_layout(files, crowd_run, tmp_path, capsys, unchanged):
    capsys.readouterr()
    out = tmp_path / "rep.md"
    assert main(["report", str(crowd_run), "--test", str(files / "holdout.csv"), "--draws", "50",
                 "-o", str(out)]) == 0
    printed = capsys.readouterr()
    held = [line for line in printed.out.splitlines() if "calibration (held-out labels)" in line]
    assert held and "ECE" in held[0]
    assert "22 decided labels" in out.read_text()  # 24 rows, 2 ties left out
    for line in printed.err.splitlines():  # no raw numpy/torch warnings: each is one crowdzoo line
        assert line.startswith("crowdzoo: warning:"), line
        assert "RuntimeWarning" not in line and "encountered in" not in line and "Pareto" not in line, line
    # a file without the run's columns is named by --test
    pd.read_csv(files / "holdout.csv", sep=";").drop(columns="winner").to_csv(tmp_path / "bad.csv", sep=";",
                                                                              index=False)
    assert main(["report", str(crowd_run), "--test", str(tmp_path / "bad.csv"), "-o", str(out)]) == 2
    err = _error(capsys)
    assert "--test" in err and "'winner'" in err
    # a user the run was not fitted on is named, in the command line's words
    holdout = pd.read_csv(files / "holdout.csv", sep=";")
    holdout.iloc[:1].assign(taster="Nobody").to_csv(tmp_path / "who.csv", sep=";", index=False)
    assert main(["report", str(crowd_run), "--test", str(tmp_path / "who.csv"), "-o", str(out)]) == 2
    err = _error(capsys)
    assert ("--test, column 'taster' (the run's --user-col): row 0: user 'Nobody' was not in the fit's "
            "data") in err
    assert "user_features" not in err and "new_users" not in err


def test_report_says_which_features_the_model_used(crowd_run, tmp_path):
    out = tmp_path / "rep.md"
    assert main(["report", str(crowd_run), "--draws", "50", "-o", str(out)]) == 0
    text = out.read_text()
    assert "| model.user_features | False (the data has no user features) |" in text
    assert "| model.item_features | True |" in text


# ---------------------------------------------------------------- unseen users, --outputs
def test_predict_names_a_mistyped_taster_and_takes_a_rule_per_row(files, crowd_run, tmp_path, capsys,
                                                                  unchanged):
    new = pd.read_csv(files / "holdout.csv", sep=";").iloc[:4].copy()
    new.loc[1, "taster"] = "Ann"  # "ann" in the fit's data
    new.to_csv(tmp_path / "new.csv", sep=";", index=False)
    out = tmp_path / "p.csv"
    assert main(["predict", str(crowd_run), "--pairs", str(tmp_path / "new.csv"), "-o", str(out)]) == 2
    err = _error(capsys)
    assert "column 'taster' (the run's --user-col): row 1: user 'Ann' was not in the fit's data" in err
    assert "--unknown-users consensus" in err and not out.exists()
    assert main(["predict", str(crowd_run), "--pairs", str(tmp_path / "new.csv"), "-o", str(out),
                 "--unknown-users", "drop"]) == 0
    assert list(pd.read_csv(out, sep=";")["taster"]) == [t for t in new["taster"] if t != "Ann"]
    assert main(["predict", str(crowd_run), "--pairs", str(tmp_path / "new.csv"), "-o", str(out),
                 "--overwrite", "--unknown-users", "prior"]) == 0
    p = pd.read_csv(out, sep=";")["p"].to_numpy()
    assert len(p) == 4 and np.all((p > 0) & (p < 1))


def test_outputs_writes_the_fit_alone(files, tmp_path, capsys, unchanged):
    users = ["--users", str(files / "tasters.csv"), "--user-id-col", "taster", "--user-one-hot", "city"]
    run = tmp_path / "run"
    assert main(["fit", "crowdgppl", *_pairs(files), *users, *CROWD, "--ties", "half",
                 "--outputs", "utilities", "--out", str(run)]) == 0
    assert {p.name for p in run.iterdir()} == {"utilities.csv", "posterior.pt", "metrics.json", "run.json"}
    out = tmp_path / "p.csv"
    assert main(["predict", str(run), "--pairs", str(files / "holdout.csv"), "-o", str(out)]) == 0
