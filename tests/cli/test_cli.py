"""The command line, in-process: fit from CSVs, clear errors, the demo."""
import json

import numpy as np
import pandas as pd

import crowdzoo as cz
from crowdzoo.cli import main


def _write(tmp_path, n_items=30, n_pairs=200):
    data, _ = cz.simulate_gppl(n_items=n_items, n_pairs=n_pairs, seed=2)
    items = data.items_frame().rename_axis("id")
    items.index = [f"item{i}" for i in items.index]
    items.index.name = "id"
    pairs = data.to_frame()
    pairs["a"] = "item" + pairs["a"].astype(str)
    pairs["b"] = "item" + pairs["b"].astype(str)
    items.to_csv(tmp_path / "items.csv")
    pairs.to_csv(tmp_path / "pairs.csv", index=False)
    return items, pairs


def test_fit_writes_outputs_and_reloads(tmp_path):
    items, _ = _write(tmp_path)
    out = tmp_path / "run"
    code = main(["fit", "gppl", "--pairs", str(tmp_path / "pairs.csv"), "--items",
                 str(tmp_path / "items.csv"), "--method", "ep", "--out", str(out), "--no-progress"])
    assert code == 0
    for name in ("utilities.csv", "predictions.csv", "metrics.json", "run.json", "posterior.pt"):
        assert (out / name).is_file(), name
    util = pd.read_csv(out / "utilities.csv")
    assert set(util["item"]) == set(items.index)
    preds = pd.read_csv(out / "predictions.csv")
    post = cz.load(out / "posterior.pt")
    np.testing.assert_array_equal(post.predict_proba(preds["a"], preds["b"]), preds["p"])
    assert json.loads((out / "metrics.json").read_text())["train_accuracy"] > 0.6


def test_missing_column_is_a_clear_error(tmp_path, capsys):
    _write(tmp_path)
    code = main(["fit", "gppl", "--pairs", str(tmp_path / "pairs.csv"), "--items",
                 str(tmp_path / "items.csv"), "--out", str(tmp_path / "o"), "--y-col", "label"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("crowdzoo: error:") and "'label'" in err and "Traceback" not in err


def test_non_numeric_feature_is_a_clear_error(tmp_path, capsys):
    items, _ = _write(tmp_path)
    items = items.astype(object)
    items.iloc[4, 1] = "n/a?"
    items.to_csv(tmp_path / "items.csv")
    code = main(["fit", "gppl", "--pairs", str(tmp_path / "pairs.csv"), "--items",
                 str(tmp_path / "items.csv"), "--out", str(tmp_path / "o")])
    assert code == 2
    err = capsys.readouterr().err
    assert "column 1 ('x1')" in err and "row 4" in err


def test_demo_quick(tmp_path, capsys):
    code = main(["demo", "--quick", "--method", "ep", "--out", str(tmp_path / "demo"), "--no-progress"])
    assert code == 0
    report = (tmp_path / "demo" / "report.md").read_text()
    assert "crowdzoo demo --out" in report and "test_accuracy" in report
    assert "held-out accuracy" in capsys.readouterr().out


def test_fit_crowdgppl_with_user_features(tmp_path):
    data, _ = cz.simulate_crowd(n_items=20, n_users=5, n_pairs=200, n_components=1, seed=0)
    pairs = data.to_frame().assign(user=lambda f: "u" + f["user"].astype(str))
    pairs.to_csv(tmp_path / "pairs.csv", index=False)
    data.items_frame().rename_axis("id").to_csv(tmp_path / "items.csv")
    users = pd.DataFrame(data.user_features, columns=["age", "x"], index=[f"u{u}" for u in data.user_ids])
    users.rename_axis("id").to_csv(tmp_path / "users.csv")
    out = tmp_path / "run"
    files = ["--pairs", str(tmp_path / "pairs.csv"), "--items", str(tmp_path / "items.csv")]
    code = main(["fit", "crowdgppl", *files, "--users", str(tmp_path / "users.csv"),
                 "--components", "2", "--n-inducing", "10",
                 "--out", str(out), "--no-progress"])
    assert code == 0
    preds = pd.read_csv(out / "predictions.csv")
    post = cz.load(out / "posterior.pt")
    assert list(post.data.user_ids) == list(users.index)
    np.testing.assert_array_equal(post.predict_proba(preds["a"], preds["b"], users=preds["user"]), preds["p"])
    code = main(["fit", "crowdgppl", *files, "--user-col", "who", "--out", str(out), "--no-progress"])
    assert code == 2


def test_demo_refuses_a_folder_holding_a_fit_run(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "posterior.pt").write_bytes(b"an earlier fit")
    assert main(["demo", "--quick", "--out", str(run), "--no-progress"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert sorted(p.name for p in run.iterdir()) == ["posterior.pt"]


def test_api_errors_are_told_from_their_fields_with_the_cli_flags():
    """The data API's errors carry their argument, row and problem; the command line places the
    argument with its own table and never shows the Python message."""
    from crowdzoo.cli.messages import FIT_ADVICE, cli_message, pairs_places

    cols = {"a": ("winner", "--a-col"), "b": ("loser", "--b-col"), "y": ("label", "--y-col")}
    places = pairs_places("--pairs", cols)
    frame = pd.DataFrame({"winner": ["x", "y", "z", "x"], "loser": ["y", "z", "x", "z"],
                          "label": [1, 0, 1, 2]})
    try:
        cz.PairwiseData.from_frame(frame, a="winner", b="loser", y="label")
    except cz.DataError as err:
        assert (err.arg, err.row) == ("y", 3) and "0.5 or a tie= column" in str(err)  # Python's words
        msg = cli_message(err, places, FIT_ADVICE, "--pairs")
    assert msg.startswith("--pairs, column 'label' (--y-col), row 3: label 2 is not 0 or 1")
    assert "tie=" not in msg
    try:
        cz.PairwiseData.from_frame(frame.assign(label=[1, 0.5, 1, 1]), a="winner", b="loser", y="label")
    except cz.DataError as err:
        assert err.arg == "ties" and "ties='drop'" in str(err)
        msg = cli_message(err, places, FIT_ADVICE, "--pairs")
    assert msg.startswith("--pairs, row 1: label 0.5 in column 'label' is a tie") and "--ties drop" in msg
    assert "ties=" not in msg
    err = cz.DataError("item_features: row 1, column 0: value nan", arg="item_features")
    assert cli_message(err, places, default="--pairs") == "--items: row 1, column 0: value nan"


def test_a_bad_route_setting_names_its_flag(tmp_path, capsys):
    _write(tmp_path, n_items=10, n_pairs=40)
    files = ["--pairs", str(tmp_path / "pairs.csv"), "--items", str(tmp_path / "items.csv")]
    code = main(["fit", "gppl", *files, "--method", "natgrad", "--likelihood", "exactly",
                 "--out", str(tmp_path / "o"), "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("crowdzoo: error: --likelihood:") and "'exactly'" in err
    assert not (tmp_path / "o").exists()
    try:  # an argparse error: --max-iter is an integer
        main(["fit", "gppl", *files, "--max-iter", "2.5", "--out", str(tmp_path / "o")])
    except SystemExit as stop:
        assert stop.code == 2
    assert "--max-iter: invalid int value" in capsys.readouterr().err
