"""GPPL's natural-gradient route on choices (crowdzoo.models.gppl.natgrad_choices): two-item choices
against the pairwise natgrad fit, and the route against NUTS on a best-of-4 survey."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import crowdzoo as cz
from crowdzoo.core.ids import choice_positions
from crowdzoo.data import ChoiceData, simulate_choices
from crowdzoo.gp.choice import best_log_probs
from crowdzoo.models import GPPL


def test_two_item_choices_fit_as_the_pairwise_natgrad():
    """A pair's label as a choice from {a, b}: the same q(f_m) and q(s), iteration for iteration, as the
    pairwise route's exact likelihood (an exact GP, the kernel fixed)."""
    pairs, _ = cz.simulate_gppl(n_items=8, n_pairs=30, seed=3)
    sets = np.column_stack([pairs.a, pairs.b])
    choices = ChoiceData.from_arrays(sets, np.where(pairs.y == 1, pairs.a, pairs.b), pairs.item_features)
    model = GPPL(n_inducing=None)
    kw = dict(method="natgrad", check_confidence=False, progress_bar=False)
    p_pairs = cz.fit(model, pairs, likelihood="exact", learn_kernel=False, **kw)
    p_choices = cz.fit(model, choices, **kw)
    assert p_choices.settings["iterations"] == p_pairs.settings["iterations"]
    assert torch.allclose(p_choices.means, p_pairs.means, atol=1e-10, rtol=0)
    assert torch.allclose(p_choices.covs, p_pairs.covs, atol=1e-10, rtol=0)
    assert abs(float(p_choices.s - p_pairs.s)) < 1e-10
    a, b = pairs.item_ids[pairs.a], pairs.item_ids[pairs.b]
    assert np.allclose(p_choices.predict_choice(np.column_stack([a, b]))[:, 0], p_pairs.predict_proba(a, b),
                       atol=1e-10, rtol=0)


def test_two_item_choices_with_the_item_residual_fit_as_the_pairwise_natgrad():
    """With the item residual, a pair's label as a choice from {a, b}: the same q(f_m) and q(r) as the
    pairwise route (the residual's mean moves the rows' μ but is no part of q(f_m)'s own mean A_J m)."""
    pairs, _ = cz.simulate_gppl(n_items=8, n_pairs=30, seed=3)
    sets = np.column_stack([pairs.a, pairs.b])
    choices = ChoiceData.from_arrays(sets, np.where(pairs.y == 1, pairs.a, pairs.b), pairs.item_features)
    model = GPPL(n_inducing=None, item_residual=True)
    kw = dict(method="natgrad", check_confidence=False, progress_bar=False)
    p_pairs = cz.fit(model, pairs, likelihood="exact", learn_kernel=False, **kw)
    p_choices = cz.fit(model, choices, **kw)
    assert p_choices.settings["iterations"] == p_pairs.settings["iterations"]
    assert torch.allclose(p_choices.means, p_pairs.means, atol=1e-10, rtol=0)
    assert torch.allclose(p_choices.r_means, p_pairs.r_means, atol=1e-10, rtol=0)
    assert torch.allclose(p_choices.r_vars, p_pairs.r_vars, atol=1e-10, rtol=0)


def test_natgrad_choice_predictions_integrate_the_members_joint_gaussian():
    """predict_choice of a natgrad fit (an exact GP) against Monte Carlo over draws of q's utilities:
    the members' correlations count (each member's variance alone was off by .066 here, the joint by
    .0008 against 10⁴ draws; about 8 s on an idle core)."""
    data, _ = simulate_choices(10, 60, 4, n_features=2, link="probit", worst=True, seed=1)
    post = cz.fit(GPPL(n_inducing=None), data, method="natgrad", check_confidence=False, progress_bar=False)
    sets = [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9, 0], [1, 5]]
    f = post.utility_draws(5_000, seed=1)
    items, mask = choice_positions(sets, post.data.item_ids)
    for worst, sign in ((False, 1.0), (True, -1.0)):
        ref = best_log_probs(sign * f[:, items], mask, "probit").exp().mean(0).numpy()
        p = post.predict_choice(sets, worst=worst)
        assert np.abs(p - np.where(mask.numpy(), ref, 0.0)).max() < 0.02


@pytest.mark.filterwarnings("ignore::crowdzoo.errors.ConvergenceWarning")
def test_mini_batches_of_best_worst_rows_of_varying_size_take_every_step():
    """Mini-batches of 50 best–worst rows of 2 to 5 items: every step is taken and the bound grows (the
    rule's raw curvature made the first step's precision indefinite, with 16 pairs of points and with 64)."""
    rng = np.random.default_rng(0)
    sizes = rng.integers(2, 6, 400)
    sets = np.full((400, 5), -1)
    for r, k in enumerate(sizes):
        sets[r, :k] = rng.choice(12, k, replace=False)
    worst = np.where(sizes > 2, sets[np.arange(400), sizes - 1], -1)
    data = ChoiceData.from_arrays(sets, sets[:, 0], rng.uniform(0, 10, (12, 2)), worst=worst)
    post = cz.fit(GPPL(n_inducing=None), data, method="natgrad", batch_size=50, max_iter=15, min_iter=1,
                  eval_size=400, n_points=16, check_confidence=False, progress_bar=False)
    bounds = post.trace["bound"]
    assert post.settings["iterations"] == 15 and bounds[-1] > bounds[0], bounds


def test_natgrad_on_choices_refuses_a_learned_kernel():
    data, _ = simulate_choices(6, 20, 3, n_features=2, link="probit", seed=0)
    with pytest.raises(cz.DataError, match="fixed length-scales"):
        cz.fit(GPPL(), data, method="natgrad", learn_kernel=True)


@pytest.mark.slow
def test_natgrad_and_nuts_agree_on_a_small_best_of_4_survey():
    """natgrad's Gaussian q against NUTS on 10 items and 60 best–worst rows of 4 (an exact GP): the
    utilities' means agree and both find the simulated ones; natgrad's factorised q(f_m) q(s) is
    narrower, as mean-field VI is (measured: sds .66 against NUTS's .78), and its choice
    probabilities, which that width moves a little, within .1."""
    data, f = simulate_choices(10, 60, 4, n_features=2, link="probit", worst=True, seed=1)
    model = GPPL(n_inducing=None)
    ng = cz.fit(model, data, method="natgrad", check_confidence=False, progress_bar=False)
    nuts = cz.fit(model, data, method="nuts", num_samples=200, warmup_steps=200, check_confidence=False,
                  progress_bar=False)
    (m_ng, v_ng), (m_nuts, v_nuts) = (tuple(x.to_numpy() for x in p.utilities()) for p in (ng, nuts))
    assert np.abs(m_ng - m_nuts).max() < 0.1
    assert np.corrcoef(m_ng, f)[0, 1] > 0.95
    ratio = np.sqrt(v_ng / v_nuts)
    assert 0.7 < ratio.min() and ratio.max() < 1.05, ratio
    sets = [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9, 0], [1, 5, 9, 3]]
    assert np.abs(ng.predict_choice(sets) - nuts.predict_choice(sets)).max() < 0.1
