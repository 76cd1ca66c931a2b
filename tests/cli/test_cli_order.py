"""``crowdzoo fit ... --order-effect``: a league's results as a CSV of home and away sides fit with the
home side's advantage, which metrics.json (``order_effect_mean``, ``order_effect_sd``) and ``crowdzoo
report`` give; predictions are for the pairs as given; refused for a model without it (naming those
with it) and for a winner-first file."""
import json

import numpy as np
import pandas as pd
import pytest

import crowdzoo as cz
from crowdzoo.cli import main
from crowdzoo.data import simulate_league

LAYOUT = ["--a-col", "home", "--b-col", "away", "--y-col", "home_won", "--no-progress"]


@pytest.fixture(scope="module")
def league_csv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("league")
    matches, _ = simulate_league(n_teams=10, seasons=2, advantage=0.4, seed=3)
    matches.rename(columns={"y": "home_won"}).to_csv(tmp / "matches.csv", index=False)
    return tmp / "matches.csv"


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("crowdzoo: error:") and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("model, method", [("gppl", "natgrad"), ("bradley-terry", "map")])
def test_a_league_fits_with_the_home_advantage_and_reports_it(league_csv, tmp_path, model, method):
    out = tmp_path / "run"
    assert main(["fit", model, "--pairs", league_csv, *LAYOUT, "--order-effect", "--method", method,
                 "--out", out]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    post = cz.load(out / "posterior.pt")
    oe = post.order_effect()
    assert metrics["order_effect_mean"] == pytest.approx(oe["mean"])
    assert metrics["order_effect_sd"] == pytest.approx(oe["sd"])
    assert 0.1 < oe["mean"] < 0.8, oe
    pred = pd.read_csv(out / "predictions.csv")
    np.testing.assert_allclose(pred["p"], post.predict_proba(pred["home"], pred["away"]), atol=1e-12)
    report = tmp_path / "rep.md"
    assert main(["report", str(out), "--draws", "50", "-o", str(report)]) == 0
    line = next(ln for ln in report.read_text().splitlines() if ln.startswith("| order effect δ"))
    assert f"{oe['mean']:.3f} ± {oe['sd']:.3f}" in line and "P(δ > 0)" in line
    if model == "gppl":
        assert "| order |" in report.read_text()  # δ in the summary of the identified variables


def test_without_the_flag_there_is_no_order_effect(league_csv, tmp_path):
    out = tmp_path / "run"
    assert main(["fit", "bradley-terry", "--pairs", league_csv, *LAYOUT, "--method", "map",
                 "--out", out]) == 0
    assert "order_effect_mean" not in json.loads((out / "metrics.json").read_text())


def test_a_model_without_it_and_a_winner_first_file_are_refused(league_csv, tmp_path, capsys):
    assert main(["fit", "collabgp", "--pairs", league_csv, *LAYOUT, "--order-effect", "--out",
                 tmp_path / "c"]) == 2
    err = _error(capsys)
    assert ("--order-effect: collabgp (CollabGP) has no setting order_effect; the models that have it: "
            "gppl, crowdgppl, bradley-terry") in err
    assert main(["fit", "gppl-per-user", "--pairs", league_csv, *LAYOUT, "--order-effect", "--out",
                 tmp_path / "u"]) == 2
    assert "gppl-per-user (GPPLPerUser) has no setting order_effect" in _error(capsys)
    assert main(["fit", "gppl", "--pairs", league_csv, "--a-col", "home", "--b-col", "away", "--winner-first",
                 "--order-effect", "--out", tmp_path / "w"]) == 2
    assert "--order-effect: a winner-first file lists each pair's winner first" in _error(capsys)
    assert not (tmp_path / "w").exists()
