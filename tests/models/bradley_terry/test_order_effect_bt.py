"""Bradley–Terry's order effect (``BradleyTerry(order_effect=True)``): a league's home advantage found by
MAP on the probit link (δ = 0.3) and, on the logit link, about 1.7 times as large, as the two links'
scales differ; δ in ArviZ; predictions at the home ground and at a neutral venue; a
winner-first file refused."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import crowdzoo as cz
from crowdzoo.data import simulate_league


@pytest.fixture(scope="module")
def league():
    matches, _ = simulate_league(n_teams=12, seasons=2, advantage=0.3, seed=1)
    return cz.PairwiseData.from_frame(matches, a="home", b="away")


def _fit(model, data, method="map", **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cz.fit(model, data, method=method, check_confidence=False, **kw)


def test_map_finds_the_home_advantage_on_either_link(league):
    probit = _fit(cz.BradleyTerry(link="probit", prior_sd=1.0, order_effect=True), league).order_effect()
    logit = _fit(cz.BradleyTerry(link="logit", prior_sd=1.7, order_effect=True), league).order_effect()
    print(probit, logit)
    assert abs(probit["mean"] - 0.3) < 0.15 and probit["sd"] == 0.0, probit
    assert 1.4 < logit["mean"] / probit["mean"] < 2.0, (probit, logit)


def test_delta_in_arviz_and_predictions_with_and_without_it(league):
    post = _fit(cz.BradleyTerry(link="probit", order_effect=True), league)
    oe = post.order_effect()
    dt = post.to_arviz(n_draws=10)
    np.testing.assert_allclose(dt.posterior["order"].values.ravel(), oe["mean"], rtol=1e-12)
    a, b = np.array(["T01", "T04"]), np.array(["T02", "T10"])
    home, away = post.predict_proba(a, b), post.predict_proba(b, a)
    neutral = post.predict_proba(a, b, order=False)
    assert (home > neutral).all() and (neutral > 1.0 - away).all()
    np.testing.assert_allclose(neutral + post.predict_proba(b, a, order=False), 1.0, atol=1e-12)
    z, _ = post.pair_moments(a, b)
    np.testing.assert_allclose(z - post.pair_moments(a, b, order=False)[0], oe["mean"], atol=1e-12)


def test_a_winner_first_file_is_refused():
    frame = pd.DataFrame({"winner": ["a", "b", "c", "a"], "loser": ["b", "c", "a", "c"]})
    data = cz.PairwiseData.from_frame(frame, a="winner", b="loser", y=None)
    with pytest.raises(cz.DataError, match="order_effect: every decided label is a ≻ b"):
        cz.fit(cz.BradleyTerry(order_effect=True), data)
