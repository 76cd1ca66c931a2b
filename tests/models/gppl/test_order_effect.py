"""GPPL's order effect (``order_effect=True``, :mod:`crowdzoo.gp.order`): a simulated league with a home
advantage δ = 0.3 on the probit scale, recovered by natgrad and EP, which agree with each other and, on a
small league, with NUTS; a later round predicted better with the order effect than without; a survey with
position bias δ = 0.25 recovered, and one without bias whose δ interval covers 0; predictions with and
without δ; the posterior's report of δ in ArviZ; refusals of data whose order says nothing."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyro.distributions as dist
import pytest
import torch

import crowdzoo as cz
from crowdzoo.data import simulate_choices, simulate_league, simulate_survey

HOME = 0.3


def covers(oe, truth, z=1.96):
    """Whether the posterior's central interval of mean ± z sd holds ``truth``."""
    return abs(oe["mean"] - truth) <= z * oe["sd"]


def _fit(model, data, method="natgrad", **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cz.fit(model, data, method=method, check_confidence=False, **kw)


@pytest.fixture(scope="module")
def league():
    """12 teams, two seasons of home and away matches (264), home advantage 0.3."""
    matches, strengths = simulate_league(n_teams=12, seasons=2, advantage=HOME, seed=1)
    return matches, strengths


@pytest.fixture(scope="module")
def league_fits(league):
    data = cz.PairwiseData.from_frame(league[0], a="home", b="away")
    model = cz.GPPL(order_effect=True)
    return {"natgrad": _fit(model, data), "ep": _fit(model, data, "ep", n_grid=9)}


@pytest.mark.parametrize("route", ["natgrad", "ep"])
def test_the_home_advantage_of_a_league_is_recovered(league_fits, route):
    oe = league_fits[route].order_effect()
    print(route, oe)
    assert covers(oe, HOME), oe
    assert 0.05 < oe["sd"] < 0.12 and oe["p_positive"] > 0.99, oe


def test_natgrad_and_ep_agree_on_the_home_advantage(league_fits):
    nat, ep = (league_fits[r].order_effect() for r in ("natgrad", "ep"))
    assert abs(nat["mean"] - ep["mean"]) < 0.2 * ep["sd"], (nat, ep)
    assert abs(nat["sd"] / ep["sd"] - 1.0) < 0.1, (nat, ep)


def test_natgrad_and_ep_agree_with_nuts_on_a_small_league():
    """Six teams, two seasons (60 matches): natgrad's and EP's posterior of δ within 0.3 of NUTS's sd of
    its mean and within a quarter of its sd."""
    matches, _ = simulate_league(n_teams=6, seasons=2, advantage=HOME, seed=4)
    data = cz.PairwiseData.from_frame(matches, a="home", b="away")
    model = cz.GPPL(order_effect=True)
    nuts = _fit(model, data, "nuts", num_samples=200, warmup_steps=150, num_chains=1,
                max_tree_depth=5).order_effect()
    for route in ("natgrad", "ep"):
        oe = _fit(model, data, route).order_effect()
        print(route, oe, nuts)
        assert abs(oe["mean"] - nuts["mean"]) < 0.3 * nuts["sd"], (route, oe, nuts)
        assert abs(oe["sd"] / nuts["sd"] - 1.0) < 0.25, (route, oe, nuts)


def test_a_later_round_is_predicted_better_with_the_order_effect(league):
    """Trained on the first 33 rounds, the last 11 (66 matches) scored by their log loss: lower with the
    order effect than without, both for the outcomes played and in expectation under the true
    probabilities; the home sides are favoured."""
    from scipy.special import ndtr

    matches, f = league
    train, test = matches[matches["round"] <= 33], matches[matches["round"] > 33]
    data = cz.PairwiseData.from_frame(train, a="home", b="away")
    y = test["y"].to_numpy()
    truth = ndtr(f[test.home].to_numpy() - f[test.away].to_numpy() + HOME)
    loss, expected, p = {}, {}, {}
    for name, model in (("with", cz.GPPL(order_effect=True)), ("without", cz.GPPL())):
        p[name] = _fit(model, data).predict_proba(test.home.to_numpy(), test.away.to_numpy())
        loss[name] = -np.mean(y * np.log(p[name]) + (1 - y) * np.log1p(-p[name]))
        expected[name] = -np.mean(truth * np.log(p[name]) + (1 - truth) * np.log1p(-p[name]))
    print(loss, expected)
    assert loss["with"] < loss["without"] - 0.01, loss
    assert expected["with"] < expected["without"] - 0.01, expected
    assert np.mean(p["with"]) > np.mean(p["without"]) + 0.05  # the home sides are favoured


def test_a_survey_with_position_bias_is_recovered_and_one_without_sits_at_zero():
    """400 answers of 20 respondents on 15 items with two features, each pair shown in a random order
    and the first shown chosen more (δ = 0.25), or not at all (δ = 0)."""
    for bias in (0.25, 0.0):
        answers, items, _ = simulate_survey(n_items=15, n_respondents=20, n_answers=20, bias=bias, seed=4)
        data = cz.PairwiseData.from_frame(answers, items, a="first", b="second")
        oe = _fit(cz.GPPL(order_effect=True), data, learn_kernel=False).order_effect()
        print(bias, oe)
        assert covers(oe, bias), (bias, oe)
        if bias:
            assert oe["p_positive"] > 0.99, oe
        else:
            assert covers(oe, 0.0) and 0.05 < oe["p_positive"] < 0.95, oe


def test_predictions_with_and_without_the_first_items_advantage(league_fits):
    post = league_fits["natgrad"]
    oe = post.order_effect()
    a, b = np.array(["T01", "T05", "T09"]), np.array(["T02", "T03", "T12"])
    home, neutral = post.predict_proba(a, b), post.predict_proba(a, b, order=False)
    away = post.predict_proba(b, a)
    assert (home > neutral).all() and (neutral > 1.0 - away).all()  # at a's ground, neutral, at b's
    np.testing.assert_allclose(neutral + post.predict_proba(b, a, order=False), 1.0, atol=1e-12)
    assert (home + away > 1.0).all()  # each way round, the home side is favoured
    mean, var = post.pair_moments(a, b)
    mean0, var0 = post.pair_moments(a, b, order=False)
    np.testing.assert_allclose(mean - mean0, oe["mean"], atol=1e-12)
    np.testing.assert_allclose(var - var0, oe["sd"] ** 2, atol=1e-12)


def test_the_posterior_of_delta_is_in_arviz_and_survives_a_round_trip(league_fits, tmp_path):
    post = league_fits["natgrad"]
    dt = post.to_arviz(n_draws=400)
    draws = dt.posterior["order"].values.ravel()
    oe = post.order_effect()
    assert abs(draws.mean() - oe["mean"]) < 0.2 * oe["sd"] and abs(draws.std() / oe["sd"] - 1) < 0.15
    post.save(tmp_path / "post.pt")
    back = cz.load(tmp_path / "post.pt")
    assert back.order_effect() == oe
    ids = np.array(["T01", "T07"])
    np.testing.assert_array_equal(back.predict_proba(ids, ids[::-1]), post.predict_proba(ids, ids[::-1]))


def test_ties_as_a_third_outcome_take_the_order_effect_too():
    """Draws kept as ties (ties="model"): the ordinal probit with Δ = f_home − f_away + δ."""
    matches, _ = simulate_league(n_teams=12, seasons=2, advantage=HOME, draw_threshold=0.3, seed=5)
    data = cz.PairwiseData.from_frame(matches, a="home", b="away", ties="model")
    post = _fit(cz.GPPL(order_effect=True), data)
    oe = post.order_effect()
    print(oe, post.tau)
    assert covers(oe, HOME), oe
    p = post.predict_outcomes(np.array(["T01"]), np.array(["T02"]))
    q = post.predict_outcomes(np.array(["T01"]), np.array(["T02"]), order=False)
    assert float(p.p_a.iloc[0]) > float(q.p_a.iloc[0])


def test_data_whose_order_says_nothing_are_refused():
    matches, _ = simulate_league(n_teams=6, seasons=1, seed=0)
    played = matches[matches.y != 0.5]
    winner = np.where(played.y == 1, played.home, played.away)
    loser = np.where(played.y == 1, played.away, played.home)
    first = pd.DataFrame({"winner": winner, "loser": loser})
    data = cz.PairwiseData.from_frame(first, a="winner", b="loser", y=None)
    with pytest.raises(cz.DataError, match="every decided label is a ≻ b.*winner-first"):
        cz.fit(cz.GPPL(order_effect=True), data)
    _fit(cz.GPPL(), data, max_iter=5)  # without the order effect: as before
    tied = matches.assign(y=np.where(np.arange(len(matches)) % 5 == 0, 0.5, matches.y))
    halves = cz.PairwiseData.from_frame(tied, a="home", b="away", ties="half")
    with pytest.raises(cz.DataError, match="half of a tie.*ties='model'"):
        cz.fit(cz.GPPL(order_effect=True), halves)
    choices = simulate_choices(n_items=6, n_rows=20, k=3, seed=0)[0]
    with pytest.raises(cz.DataError, match="choices among k items list no item first"):
        cz.fit(cz.GPPL(order_effect=True), choices, method="svi")


def test_the_prior_of_delta_is_checked_at_construction():
    with pytest.raises(cz.DataError, match="order_prior: the order effect δ is a real number with a Normal"):
        cz.GPPL(order_effect=True, order_prior=dist.Gamma(2.0, 2.0))
    with pytest.raises(cz.DataError, match="order_prior: the prior of the order effect, which the model has "
                                           "only with order_effect=True"):
        cz.GPPL(order_prior=dist.Normal(0.0, 1.0))
    with pytest.raises(cz.DataError, match="order_effect: expected True or False"):
        cz.BradleyTerry(order_effect="yes")
    with pytest.raises(cz.DataError, match="order_prior: δ is one number"):
        cz.CrowdGPPL(order_effect=True, order_prior=dist.Normal(torch.zeros(2), 1.0))
    matches, _ = simulate_league(n_teams=6, seasons=1, seed=0)
    data = cz.PairwiseData.from_frame(matches, a="home", b="away")
    model = cz.GPPL(order_effect=True, order_prior=dist.Normal(0.3, 0.2))
    with pytest.raises(cz.DataError, match="order_prior: ep's prior has mean 0"):
        cz.fit(model, data, method="ep")
    informed = _fit(model, data, max_iter=50).order_effect()  # natgrad takes a prior of any mean
    assert informed["sd"] < 0.2


def test_models_without_it_are_refused():
    with pytest.raises(TypeError):
        cz.CollabGP(order_effect=True)
    with pytest.raises(cz.DataError, match="order_effect: GPPL per user has no order effect"):
        cz.GPPLPerUser(order_effect=True)
    with pytest.raises(cz.DataError, match="item_gp: the communities' item GP has no order effect"):
        cz.DPMCommunities(item_gp=cz.GPPL(order_effect=True))
    post = _fit(cz.GPPL(), cz.simulate_gppl(n_items=6, n_pairs=30, seed=0)[0], max_iter=5)
    with pytest.raises(cz.DataError, match="this fit has no order effect"):
        post.order_effect()
