"""Choices among k items through the command line (``fit --choices``, ``predict --choices``, ``report``):
a best–worst survey in the long layout with string ids, ``;``-separated, yes/no best column and sets of
three and four, fitted and predicted by the CLI and compared with the Python API on the same file (equal
numbers) and with the logit choice written out (softmax of the fitted utilities); models and routes
without a choice likelihood are refused naming the flag; every input file is only read."""
from __future__ import annotations

import inspect
import json

import numpy as np
import pandas as pd
import pytest

import crowdzoo as cz
from crowdzoo.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")

CLAIMS = ["saves time", "cheaper", "eco-friendly", "easy setup", "quiet", "long warranty", "sleek",
          "smart app"]
APPEAL = pd.Series([1.2, 0.9, 0.4, 0.6, -0.2, 0.1, -0.8, -0.5], index=CLAIMS)
COLS = ["--choice-col", "task", "--item-col", "claim", "--chosen-col", "best", "--worst-col", "worst"]


def _survey(n=60, seed=0) -> pd.DataFrame:
    """Screens of 3 or 4 claims, the best and the worst drawn from the sequential logit choice."""
    rng = np.random.default_rng(seed)
    lines = []
    for task in range(n):
        shown = rng.choice(CLAIMS, 3 + task % 2, replace=False)
        best = shown[(APPEAL[shown].to_numpy() + rng.gumbel(size=shown.size)).argmax()]
        rest = [c for c in shown if c != best]
        worst = rest[(-APPEAL[rest].to_numpy() + rng.gumbel(size=len(rest))).argmax()]
        lines += [{"task": f"t{task:02d}", "claim": c, "best": "yes" if c == best else "no",
                   "worst": int(c == worst)} for c in shown]
    return pd.DataFrame(lines)


@pytest.fixture
def files(tmp_path):
    _survey().to_csv(tmp_path / "survey.csv", sep=";", index=False)
    new = pd.DataFrame({"task": ["n1", "n1", "n1", "n2", "n2", "n3", "n3", "n3", "n3"],
                        "claim": ["sleek", "cheaper", "quiet", "saves time", "smart app", "quiet", "sleek",
                                  "eco-friendly", "easy setup"]})
    new.to_csv(tmp_path / "screens.csv", sep=";", index=False)
    _survey(30, seed=1).to_csv(tmp_path / "held.csv", sep=";", index=False)
    return tmp_path


@pytest.fixture
def unchanged(files):
    before = {p.name: p.read_bytes() for p in files.iterdir() if p.is_file()}
    yield
    assert {n: (files / n).read_bytes() for n in before} == before


def _run(capsys, *argv):
    capsys.readouterr()
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    return code, err[-1] if err else ""


def _api_data(path):
    frame = pd.read_csv(path, sep=";")
    return cz.ChoiceData.from_frame(frame, choice="task", item="claim", chosen="best", worst="worst")


def test_fit_and_predict_choices_match_the_python_api_and_the_logit_choice(files, capsys, unchanged):
    run = files / "run"
    code, _ = _run(capsys, "fit", "bradley-terry", "--choices", files / "survey.csv", "--sep", ";", *COLS,
                   "--out", run)
    assert code == 0
    post = cz.fit(cz.BradleyTerry(), _api_data(files / "survey.csv"), method="map", seed=0)
    # utilities.csv: the API's utilities
    util = pd.read_csv(run / "utilities.csv").set_index("item")
    mean = post.utilities()[0]
    np.testing.assert_allclose(util["mean"].reindex(mean.index), mean.to_numpy(), rtol=0, atol=1e-12)
    # predictions.csv: the rows of --choices in order, their own columns, and p = P(chosen)
    survey = pd.read_csv(files / "survey.csv", sep=";")
    pred = pd.read_csv(run / "predictions.csv", sep=";")
    assert list(pred.columns) == [*survey.columns, "p"]
    pd.testing.assert_frame_equal(pred[survey.columns], survey)
    sets = [g["claim"].tolist() for _, g in survey.groupby("task", sort=False)]
    p_api = post.predict_choice(sets)
    slot = survey.groupby("task", sort=False).cumcount().to_numpy()
    row = pd.factorize(survey["task"])[0]
    np.testing.assert_allclose(pred["p"], p_api[row, slot], rtol=0, atol=1e-12)
    # … which is the logit choice among the set's members at the fitted utilities
    f = util["mean"]
    e = np.exp(f[survey["claim"]].to_numpy())
    total = pd.Series(e).groupby(row).transform("sum").to_numpy()
    np.testing.assert_allclose(pred["p"], e / total, atol=1e-12)
    metrics = json.loads((run / "metrics.json").read_text())
    chosen = pred["best"] == "yes"
    assert metrics["n_choices"] == 60 and metrics["n_rows"] == len(survey)
    assert metrics["train_cee"] == pytest.approx(-np.log(pred["p"][chosen]).mean(), abs=1e-12)
    top = pred.groupby("task", sort=False)["p"].idxmax()
    assert metrics["train_accuracy"] == pytest.approx(chosen[top].mean(), abs=1e-12)
    # predict: new screens (no best column), in the run's layout
    code, _ = _run(capsys, "predict", run, "--choices", files / "screens.csv", "-o", files / "screens_p.csv")
    assert code == 0
    screens = pd.read_csv(files / "screens.csv", sep=";")
    out = pd.read_csv(files / "screens_p.csv", sep=";")
    assert list(out.columns) == ["task", "claim", "p"]
    p_new = post.predict_choice([g["claim"].tolist() for _, g in screens.groupby("task", sort=False)])
    slot = screens.groupby("task", sort=False).cumcount().to_numpy()
    np.testing.assert_allclose(out["p"], p_new[pd.factorize(screens["task"])[0], slot], rtol=0, atol=1e-12)
    np.testing.assert_allclose(out.groupby("task")["p"].sum(), 1.0, atol=1e-12)
    # an item the run was not fitted on is named by the run's column and its row
    screens.assign(claim=screens["claim"].where(screens.index != 4, "glossy")).to_csv(
        files / "odd.csv", sep=";", index=False)
    code, msg = _run(capsys, "predict", run, "--choices", files / "odd.csv")
    assert code == 2
    assert msg.startswith("crowdzoo: error: --choices, column 'claim' (the run's --item-col): row 4: item "
                          "'glossy' was not in the fit's data"), msg


def test_report_of_a_choices_run_calibrates_training_and_held_out_choices(files, capsys, unchanged):
    run = files / "run"
    assert _run(capsys, "fit", "bradley-terry", "--choices", files / "survey.csv", "--sep", ";", *COLS,
                "--out", run)[0] == 0
    capsys.readouterr()
    assert main(["report", str(run), "--test", str(files / "held.csv"), "-o", str(files / "rep.md")]) == 0
    printed = capsys.readouterr().out
    assert "calibration (training choices)" in printed and "calibration (held-out choices)" in printed
    assert "PPC: item choice rates" in printed and "PPC: item worst rates" in printed
    assert "held.csv (30 choices)" in (files / "rep.md").read_text()


def test_gppl_takes_choices_by_svi_as_the_api_does(files, capsys, unchanged):
    run = files / "gppl"
    code, _ = _run(capsys, "fit", "gppl", "--choices", files / "survey.csv", "--sep", ";", *COLS[:6],
                   "--num-steps", "30", "--n-draws", "20", "--no-progress", "--out", run)
    assert code == 0
    assert json.loads((run / "metrics.json").read_text())["method"] == "svi"  # the first route with choices
    frame = pd.read_csv(files / "survey.csv", sep=";")
    data = cz.ChoiceData.from_frame(frame, choice="task", item="claim", chosen="best")
    post = cz.fit(cz.GPPL(), data, seed=0, num_steps=30, n_draws=20, progress_bar=False)
    assert post.method == "svi"
    pred = pd.read_csv(run / "predictions.csv", sep=";")
    p = post.predict_choice([g["claim"].tolist() for _, g in frame.groupby("task", sort=False)])
    slot = frame.groupby("task", sort=False).cumcount().to_numpy()
    np.testing.assert_allclose(pred["p"], p[pd.factorize(frame["task"])[0], slot], rtol=0, atol=1e-12)
    # and by natgrad, the route the table also lists, as the API's natgrad fit
    code, _ = _run(capsys, "fit", "gppl", "--choices", files / "survey.csv", "--sep", ";", *COLS[:6],
                   "--method", "natgrad", "--no-progress", "--out", files / "gppl_ng")
    assert code == 0
    post = cz.fit(cz.GPPL(), data, method="natgrad", seed=0, progress_bar=False)
    pred = pd.read_csv(files / "gppl_ng" / "predictions.csv", sep=";")
    p = post.predict_choice([g["claim"].tolist() for _, g in frame.groupby("task", sort=False)])
    np.testing.assert_allclose(pred["p"], p[pd.factorize(frame["task"])[0], slot], rtol=0, atol=1e-12)


def test_models_and_routes_without_a_choice_likelihood_are_refused_naming_the_flag(files, capsys, unchanged):
    survey, out = files / "survey.csv", ["--out", files / "r"]
    code, msg = _run(capsys, "fit", "collabgp", "--choices", survey, "--sep", ";", *COLS, *out)
    assert code == 2 and msg.startswith("crowdzoo: error: --choices: collabgp has no likelihood of choices")
    takers = [f"{e.name} (--method {', '.join(e.choices)})" for e in cz.zoo.ZOO if e.choices]
    assert takers and all(t in msg for t in takers)  # read from the zoo's table
    code, msg = _run(capsys, "fit", "gppl", "--choices", survey, "--sep", ";", *COLS, "--method", "ep",
                     "--out", files / "r")
    assert code == 2
    assert msg == ("crowdzoo: error: --choices: gppl's 'ep' route has no likelihood of choices among k "
                   "items; fit it with --method svi (its routes with choices: svi, nuts, natgrad)")
    code, msg = _run(capsys, "fit", "bradley-terry", "--choices", survey, "--pairs", survey, *out)
    assert code == 2 and "--pairs: not with --choices" in msg
    code, msg = _run(capsys, "fit", "bradley-terry", "--choices", survey, "--ties", "model", *out)
    assert code == 2 and "--ties: not with --choices" in msg
    code, msg = _run(capsys, "fit", "bradley-terry", "--pairs", survey, "--choice-col", "task", *out)
    assert code == 2 and msg == "crowdzoo: error: --choice-col: applies to --choices, which was not given"
    code, msg = _run(capsys, "fit", "scdc", "--choices", survey, "--out", files / "r")
    assert code == 2 and "--choices" in msg
    # a file with two bests in one choice: the flag, the user's column and the row
    bad = pd.read_csv(survey, sep=";")
    bad.loc[bad["task"] == "t03", "best"] = "yes"
    bad.to_csv(files / "bad.csv", sep=";", index=False)
    code, msg = _run(capsys, "fit", "bradley-terry", "--choices", files / "bad.csv", "--sep", ";", *COLS,
                     "--out", files / "r")
    first = int(np.flatnonzero(bad["task"] == "t03")[0])
    assert code == 2
    assert msg == (f"crowdzoo: error: --choices, column 'best' (--chosen-col), row {first}: choice 't03' "
                   f"marks {(bad['task'] == 't03').sum()} items as chosen; mark exactly one")
    assert not (files / "r").exists()


def test_the_choice_columns_default_to_the_python_apis():
    from crowdzoo.cli.choices import api_defaults

    sig = inspect.signature(cz.ChoiceData.from_frame).parameters
    assert api_defaults() == {arg: sig[arg].default for arg in ("choice", "item", "chosen", "worst")}
