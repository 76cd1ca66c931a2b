"""crowdGPPL's order effect (``CrowdGPPL(order_effect=True)``): a survey of 30 respondents whose first
shown item is chosen more (δ = 0.25) recovered by natgrad (and by the linearised route on mini-batches
when asked), one without position bias whose interval of δ covers 0; svi's program and guide carry δ;
personal and consensus predictions at the order given and without δ; δ in ArviZ."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import crowdzoo as cz
from crowdzoo.data import simulate_survey

MODEL = cz.CrowdGPPL(n_components=2, order_effect=True)


def _survey(bias: float):
    answers, items, _ = simulate_survey(n_items=12, n_respondents=30, n_answers=15, bias=bias, seed=7)
    return cz.PairwiseData.from_frame(answers, items, a="first", b="second", user="respondent")


def _fit(model, data, method="natgrad", **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cz.fit(model, data, method=method, check_confidence=False, **kw)


@pytest.fixture(scope="module")
def biased():
    data = _survey(0.25)
    return data, _fit(MODEL, data, select_scales=False)


def test_position_bias_of_a_survey_is_recovered(biased):
    oe = biased[1].order_effect()
    print(oe)
    assert abs(oe["mean"] - 0.25) < 1.96 * oe["sd"] and oe["p_positive"] > 0.99, oe
    assert biased[1].settings["likelihood"] == "exact"  # the default with the order effect


def test_without_position_bias_the_interval_covers_zero():
    oe = _fit(MODEL, _survey(0.0), select_scales=False).order_effect()
    print(oe)
    assert abs(oe["mean"]) < 1.96 * oe["sd"], oe


def test_the_linearised_route_on_mini_batches_finds_it_too(biased):
    data, exact = biased
    oe = _fit(MODEL, data, select_scales=False, likelihood="linearised", batch_size=200,
              learn_kernel=False, max_iter=100).order_effect()
    print(oe, exact.order_effect())
    assert abs(oe["mean"] - 0.25) < 1.96 * oe["sd"] and oe["p_positive"] > 0.95, oe


def test_svi_carries_delta_in_its_program_and_guide():
    """The tiny example's crowd (40 labels) by a few svi steps: δ is a site of the program and of the
    mean-field guide, and its draws are the posterior's."""
    example = cz.zoo.entry("crowdgppl").make_example()
    model = cz.CrowdGPPL(n_components=2, n_inducing=5, n_inducing_users=None, order_effect=True)
    post = _fit(model, example.data, "svi", num_steps=20, n_draws=50)
    assert post.order_means.shape == (50,) and post.order_vars is None
    oe = post.order_effect()
    assert abs(oe["mean"]) < 1.0 and 0.0 < oe["sd"] < 0.5, oe


def test_predictions_with_and_without_delta_and_its_arviz_draws(biased):
    data, post = biased
    oe = post.order_effect()
    ids, users = data.item_ids, data.user_ids
    a, b, u = ids[[0, 3, 5]], ids[[1, 4, 9]], users[[0, 1, 2]]
    for who in (u, None):  # personal and consensus
        home, neutral = post.predict_proba(a, b, users=who), post.predict_proba(a, b, users=who, order=False)
        away = post.predict_proba(b, a, users=who)
        assert (home > neutral).all() and (neutral > 1.0 - away).all()
        back = post.predict_proba(b, a, users=who, order=False)
        np.testing.assert_allclose(neutral + back, 1.0, atol=1e-12)
    draws = post.to_arviz(n_draws=300).posterior["order"].values.ravel()
    assert abs(draws.mean() - oe["mean"]) < 0.2 * oe["sd"] and abs(draws.std() / oe["sd"] - 1) < 0.2
