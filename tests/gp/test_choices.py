"""Choices among k items (crowdzoo.gp.choice, ChoiceData): the probit choice against Monte Carlo,
two-item sets against the pairwise models, recovery of simulated utilities, NUTS against svi, the
choice likelihood against rank-breaking, and the data's errors."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pyro
import pytest
import torch
from pyro import poutine

import crowdzoo as cz
from crowdzoo.comparisons.choices import calibration, interval, kendall
from crowdzoo.data import ChoiceData, PairwiseData, simulate_choices
from crowdzoo.gp.choice import (
    best_log_probs,
    expected_row_log_lik,
    normal_points,
    row_log_lik,
    worst_log_probs,
)
from crowdzoo.models import GPPL, BradleyTerry
from crowdzoo.models.gppl.posterior import GPPLPosterior

F64 = torch.float64


def _sets(seed=0, R=5, K=4):
    g = torch.Generator().manual_seed(seed)
    f = 1.5 * torch.randn(R, K, generator=g, dtype=F64)
    mask = torch.ones(R, K, dtype=torch.bool)
    mask[1, 3] = False
    mask[2, 2:] = False
    return f, mask, g


def test_probit_choice_matches_monte_carlo_and_sums_to_one():
    f, mask, g = _sets()
    f[0] = torch.tensor([4.0, -3.0, 0.0, 1.0], dtype=F64)  # a far tail: P ≈ 1e-16 for item 1
    var = 0.5 * torch.rand(f.shape, generator=g, dtype=F64)
    for v in (None, var):
        p = best_log_probs(f, mask, "probit", v).exp()
        assert torch.allclose(p.sum(-1), torch.ones(5, dtype=F64), atol=1e-9)
        sd = (0.5 + (torch.zeros_like(f) if v is None else v)).sqrt()
        S = 200_000
        u = torch.where(mask, f + sd * torch.randn(S, *f.shape, generator=g, dtype=F64), -math.inf)
        mc = torch.nn.functional.one_hot(u.argmax(-1), f.shape[-1]).to(F64).mean(0)
        se = (mc * (1 - mc) / S).sqrt()
        assert bool(((p - mc).abs() <= 5 * se + 1e-4).all())
    # far in the tail the mode-centred rule agrees with a much finer one in log space
    fine = best_log_probs(f, mask, "probit", n=80, newton=20)
    assert torch.allclose(best_log_probs(f, mask, "probit"), fine, rtol=1e-7)


def test_worst_is_the_best_of_the_rest_with_negated_utilities():
    f, mask, _ = _sets(1)
    best = torch.zeros(5, dtype=torch.long)
    for link in ("probit", "logit"):
        lw = worst_log_probs(f, mask, best, link)
        assert torch.isinf(lw[:, 0]).all()
        assert torch.allclose(lw.exp().sum(-1), torch.ones(5, dtype=F64), atol=1e-9)
    rest = mask.clone()
    rest[:, 0] = False
    lw = worst_log_probs(f, mask, best, "logit")
    assert torch.allclose(lw[rest], torch.log_softmax(torch.where(rest, -f, -math.inf), -1)[rest])


def _pair_choices(pairs: PairwiseData) -> ChoiceData:
    """The labels of ``pairs`` as two-item choices."""
    sets = np.column_stack([pairs.a, pairs.b])
    chosen = np.where(pairs.y == 1, pairs.a, pairs.b)
    return ChoiceData.from_arrays(sets, chosen, pairs.item_features)


def _log_joint(model, data, values):
    setup = model.setup(data)
    fn, args = model.program(setup, data)
    return poutine.trace(poutine.condition(fn, data=values)).get_trace(*args).log_prob_sum()


@pytest.mark.parametrize("model", [BradleyTerry(), BradleyTerry(link="probit"), GPPL(n_inducing=None)])
def test_two_item_choices_are_the_pairwise_model(model):
    pairs, _ = cz.simulate_gppl(n_items=8, n_pairs=30, seed=3)
    choices = _pair_choices(pairs)
    g = torch.Generator().manual_seed(0)
    if isinstance(model, BradleyTerry):
        values = {"f": torch.randn(8, generator=g, dtype=F64)}
    else:
        values = {"s": torch.tensor(0.7, dtype=F64), "u": torch.randn(8, generator=g, dtype=F64)}
    lp_pairs, lp_choices = _log_joint(model, pairs, values), _log_joint(model, choices, values)
    assert abs(float(lp_pairs - lp_choices)) < 1e-10
    # and its predictions: P(a chosen from {a, b}) = P(a ≻ b), per draw and mixed
    a, b = pairs.item_ids[pairs.a], pairs.item_ids[pairs.b]
    if isinstance(model, BradleyTerry):
        post = cz.fit(model, pairs, method="map", check_confidence=False)
    else:
        sites = {"s": torch.rand(20, generator=g, dtype=F64) + 0.5, "u": torch.randn(20, 8, generator=g,
                                                                                      dtype=F64)}
        post = GPPLPosterior.from_draws(model, model.setup(pairs), pairs, sites, "svi")
    p = post.predict_choice(np.column_stack([a, b]))
    assert np.allclose(p[:, 0], post.predict_proba(a, b), atol=1e-10, rtol=0)
    assert np.allclose(p.sum(1), 1.0, atol=1e-12)


def test_bradley_terry_recovers_best_worst_utilities_and_calibrates():
    f = np.random.default_rng(5).normal(0, 1.5, 15)
    data, _ = simulate_choices(15, 1200, 4, n_features=0, link="logit", worst=True, f=f, seed=1)
    train, held = data.subset(np.arange(400)), data.subset(np.arange(400, 1200))
    post = cz.fit(BradleyTerry(), train, method="map")
    mean = post.utilities()[0].to_numpy()
    assert kendall(mean, f) > 0.8
    assert np.corrcoef(mean, f)[0, 1] > 0.95
    p = post.predict_choice(held.sets)
    cal = calibration(p, held.mask, held.best)
    assert abs(cal["confidence gap"]) < 0.05 and cal["ECE"] < 0.04
    idata = post.to_arviz(n_draws=5)
    ll = idata["log_likelihood"]["choice"].values
    assert ll.shape == (1, 5, 400)
    best = torch.as_tensor(train.best)
    worst = torch.as_tensor(train.worst)
    own = row_log_lik(post.f[:, torch.as_tensor(train.sets).clamp_min(0)], torch.as_tensor(train.mask), best,
                      worst, "logit")
    assert np.allclose(ll[0, 0], own[0].numpy())


def test_choice_model_ranks_as_well_as_rank_breaking():
    tau = {"choices": [], "pairs": []}
    for seed in range(6):  # Kendall's τ of one survey is noisy: the mean over six
        f = np.random.default_rng(seed + 10).normal(0, 1.5, 20)
        data, _ = simulate_choices(20, 150, 4, n_features=0, link="logit", worst=True, f=f, seed=seed)
        for how, d in (("choices", data), ("pairs", data.rank_breaking())):
            post = cz.fit(BradleyTerry(), d, method="map", check_confidence=False)
            tau[how].append(kendall(post.utilities()[0].to_numpy(), f))
    assert np.mean(tau["choices"]) >= np.mean(tau["pairs"]) - 0.01 and np.mean(tau["choices"]) > 0.75


@pytest.mark.slow
def test_choice_model_is_calibrated_where_rank_breaking_is_over_confident():
    f = np.random.default_rng(7).normal(0, 1.5, 20)
    data, _ = simulate_choices(20, 1200, 4, n_features=0, link="logit", worst=True, f=f, seed=2)
    train, held = data.subset(np.arange(200)), data.subset(np.arange(200, 1200))
    out = {}
    for how, d in (("choices", train), ("pairs", train.rank_breaking())):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cz.ConvergenceWarning)
            post = cz.fit(BradleyTerry(), d, method="svi", num_steps=800, n_draws=200, check_confidence=False)
        out[how] = {"tau": kendall(post.utilities()[0].to_numpy(), f), **interval(post.f.numpy(), f),
                    **calibration(post.predict_choice(held.sets), held.mask, held.best)}
    choice, pairs = out["choices"], out["pairs"]
    assert choice["tau"] >= pairs["tau"] - 0.02
    # rank-breaking counts one best–worst row as 5 independent labels: its posterior is too narrow
    assert pairs["posterior sd"] < 0.9 * choice["posterior sd"]
    assert pairs["coverage 90%"] < choice["coverage 90%"] and choice["coverage 90%"] >= 0.85
    assert choice["log loss"] <= pairs["log loss"] + 0.01 and choice["ECE"] < 0.03


def test_gppl_svi_recovers_best_of_4_utilities_and_refuses_ep():
    data, f = simulate_choices(12, 100, 4, n_features=2, link="probit", seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cz.ConvergenceWarning)
        post = cz.fit(GPPL(), data, num_steps=200, n_draws=100)
    assert post.method == "svi"  # the first route of gppl that takes choices
    assert np.corrcoef(post.utilities()[0].to_numpy(), f)[0, 1] > 0.85
    p = post.predict_choice([[0, 1, 2], [3, 4]])
    assert np.allclose(p.sum(1), 1.0) and p[1, 2] == 0.0
    with pytest.raises(cz.DataError, match="method='svi'"):
        cz.fit(GPPL(), data, method="ep")
    with pytest.raises(cz.DataError, match="bradley-terry"):
        cz.fit(cz.models.CollabGP(), data)


@pytest.mark.slow
def test_nuts_and_svi_agree_on_a_small_choice_problem():
    """svi against NUTS on what choices identify: utilities up to a common shift, which only the prior
    decides. The centred utilities f − mean(f) agree in mean and sd, and so do the choice
    probabilities. (The raw utilities' sds do not: svi's guide, mean-field or full-rank, leaves the
    shift's spread near its start in 1500 steps — measured sds .24–.25 against NUTS's .42.)"""
    f = np.array([1.0, 0.5, 0.0, -0.5, -1.0])
    data, _ = simulate_choices(5, 80, 3, n_features=0, link="probit", worst=True, f=f, seed=4)
    model = BradleyTerry(link="probit", prior_sd=1.0)
    nuts = cz.fit(model, data, method="nuts", num_samples=300, warmup_steps=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cz.ConvergenceWarning)
        svi = cz.fit(model, data, method="svi", num_steps=1500, n_draws=1000)

    def centred(post):
        f = post.utility_draws(1000).numpy()
        return f - f.mean(1, keepdims=True)

    c_n, c_s = centred(nuts), centred(svi)
    assert np.abs(c_n.mean(0) - c_s.mean(0)).max() < 0.1
    assert np.allclose(c_s.std(0), c_n.std(0), rtol=0.25), (c_s.std(0), c_n.std(0))
    sets = [[0, 1, 2], [2, 3, 4], [0, 4, 1]]
    assert np.abs(nuts.predict_choice(sets) - svi.predict_choice(sets)).max() < 0.03


def test_from_frame_long_layout_round_trip_and_rank_breaking():
    frame = pd.DataFrame({"q": ["t1"] * 4 + ["t2"] * 3, "who": ["ann"] * 4 + ["bo"] * 3,
                          "item": ["a", "b", "c", "d", "b", "d", "e"],
                          "best": [0, 1, 0, 0, 0, 0, 1], "worst": [0, 0, 0, 1, 1, 0, 0]})
    before = frame.copy()
    data = ChoiceData.from_frame(frame, choice="q", chosen="best", worst="worst", user="who")
    pd.testing.assert_frame_equal(frame, before)
    assert data.n_rows == 2 and list(data.set_sizes) == [4, 3] and list(data.item_ids) == list("abcde")
    assert list(data.item_ids[data.chosen_items]) == ["b", "e"]
    back = data.to_frame()
    assert list(back["item"]) == list(frame["item"]) and list(back["worst"]) == list(frame["worst"])
    pairs = data.rank_breaking()
    assert pairs.n_pairs == (2 * 4 - 3) + (2 * 3 - 3)
    assert list(np.bincount(pairs.source_rows)) == [5, 3]
    assert np.array_equal(pairs.users, data.users[pairs.source_rows])
    t2 = pairs.subset(pairs.source_rows == 1).to_frame()  # e best, b worst of {b, d, e}
    assert sorted(zip(t2["a"], t2["b"], strict=True)) == [("d", "b"), ("e", "b"), ("e", "d")]


@pytest.mark.parametrize("change, arg, row, words", [
    (dict(best=[0, 0, 0, 0, 0, 0, 1]), "chosen", 0, "marks 0 items"),
    (dict(best=[1, 1, 0, 0, 0, 0, 1]), "chosen", 0, "marks 2 items"),
    (dict(worst=[0, 1, 0, 0, 0, 0, 0]), "worst", 1, "chosen .best. and worst"),
    (dict(item=["a", "b", "c", "a", "b", "d", "e"]), "item", 0, "more than once"),
    (dict(q=["t1"] * 6 + ["t3"]), "choice", 6, "at least 2"),
    (dict(who=["ann"] * 3 + ["bo"] * 4), "user", 3, "changes within"),
])
def test_from_frame_errors_name_the_column_and_row(change, arg, row, words):
    frame = pd.DataFrame({"q": ["t1"] * 4 + ["t2"] * 3, "who": ["ann"] * 4 + ["bo"] * 3,
                          "item": ["a", "b", "c", "d", "b", "d", "e"],
                          "best": [0, 1, 0, 0, 0, 0, 1], "worst": [0, 0, 0, 1, 1, 0, 0]})
    for k, v in change.items():
        frame[k] = v
    with pytest.raises(cz.DataError, match=words) as err:
        ChoiceData.from_frame(frame, choice="q", chosen="best", worst="worst", user="who")
    assert err.value.arg == arg and err.value.row == row


def test_from_arrays_errors():
    X = np.zeros((5, 0))
    cases = [(dict(sets=[[0, 1], [2]], chosen=[0, 2]), "at least 2"),
             (dict(sets=[[0, 1], [2, 2]], chosen=[0, 2]), "more than once"),
             (dict(sets=[[0, 1], [2, 3]], chosen=[0, 1]), "not in its set"),
             (dict(sets=[[0, 1, 4], [2, 3]], chosen=[0, 2], worst=[0, -1]), "both the best and the worst"),
             (dict(sets=[[0, 7], [2, 3]], chosen=[0, 2]), "out of range")]
    for kw, words in cases:
        with pytest.raises(cz.DataError, match=words) as err:
            ChoiceData.from_arrays(item_features=X, **kw)
        assert err.value.row is not None
    sets = np.array([[0, 1, -1], [2, 3, 4]])
    before = sets.copy()
    data = ChoiceData.from_arrays(sets, [1, 4], X)
    assert np.array_equal(sets, before) and list(data.set_sizes) == [2, 3]


def test_predict_choice_errors_and_worst():
    data, _ = simulate_choices(6, 60, 3, n_features=0, link="logit", seed=0)
    post = cz.fit(BradleyTerry(), data, method="map")
    with pytest.raises(cz.DataError, match="not a training item"):
        post.predict_choice([[0, 99]])
    with pytest.raises(cz.DataError, match="more than once"):
        post.predict_choice([[0, 1, 1]])
    f = post.f[0]
    pw = post.predict_choice([[0, 1, 2]], worst=True)
    assert np.allclose(pw[0], torch.softmax(-f[[0, 1, 2]], 0).numpy())
    pyro.clear_param_store()


@pytest.mark.parametrize("model,method", [(BradleyTerry(), "map"), (GPPL(), "svi")])
def test_a_choice_fit_saves_and_loads_to_the_same_predictions(tmp_path, model, method):
    """save/load of a fit to choices: the loaded posterior predicts every set (best and worst) as the
    fitted one does, and keeps its data's kind."""
    data, _ = simulate_choices(10, 120, 4, n_features=0 if isinstance(model, BradleyTerry) else 2,
                               link="probit", worst=True, seed=3)
    kw = {"num_steps": 100, "progress_bar": False} if method == "svi" else {}
    post = cz.fit(model, data, method=method, **kw)
    post.save(tmp_path / "choice.pt")
    back = cz.load(tmp_path / "choice.pt")
    sets = [list(data.item_ids[:4]), list(data.item_ids[5:8])]
    for worst in (False, True):
        np.testing.assert_array_equal(np.asarray(back.predict_choice(sets, worst=worst)),
                                      np.asarray(post.predict_choice(sets, worst=worst)))
    assert isinstance(back.data, ChoiceData) and back.data.n_rows == data.n_rows


def test_expected_row_log_lik_matches_monte_carlo_and_its_derivatives_finite_differences():
    """E[log p(row | f)] under a Gaussian f of the rows' members (best and worst, sets of 2 to 4 with
    padding, extra noise variances) against plain Monte Carlo, and its derivatives in μ, Σ and the
    noise variances against central differences of the same deterministic rule."""
    g = torch.Generator().manual_seed(0)
    R, K = 4, 4
    mu = torch.randn(R, K, generator=g, dtype=F64)
    L = 0.5 * torch.randn(R, K, K, generator=g, dtype=F64)
    cov = L @ L.transpose(-1, -2) + 0.05 * torch.eye(K, dtype=F64)
    mask = torch.ones(R, K, dtype=torch.bool)
    mask[1, 3] = False
    mask[2, 2:] = False  # a row of two: the pairwise rule
    best, worst = torch.tensor([0, 1, 1, 2]), torch.tensor([1, 0, -1, -1])
    var = 0.3 * torch.rand(R, K, generator=g, dtype=F64)
    points = normal_points(K, 64)
    ell, d_mu, d_cov, d_var = expected_row_log_lik(mu, cov, mask, best, worst, var, points=points)
    S = 8_000
    eps_mc = torch.randn(S, R, K, generator=g, dtype=F64)
    f = mu + torch.einsum("rkl,nrl->nrk", torch.linalg.cholesky(cov), eps_mc)
    lp = row_log_lik(f, mask, best, worst, "probit", var.expand(f.shape))
    assert bool(((ell - lp.mean(0)).abs() < 4 * lp.std(0) / math.sqrt(S) + 1e-3).all()), (ell, lp.mean(0))
    eps = 1e-5

    def ell_at(m=mu, c=cov, v=var):
        return expected_row_log_lik(m, c, mask, best, worst, v, points=points)[0]

    # the quadrature rows' derivatives are those of their rule's value (1e-6); the two-item row's are the
    # pairwise route's Gauss–Hermite estimates of E[g'] and E[g'']/2, within 1e-3 of its value's
    for r, k, l in [(0, 0, 1), (3, 2, 2), (1, 1, 2), (2, 0, 1)]:
        tol = 1e-3 if r == 2 else 1e-6
        D = torch.zeros_like(cov)
        D[r, k, l] = D[r, l, k] = eps
        fd = (ell_at(c=cov + D) - ell_at(c=cov - D))[r] / (2 * eps)
        assert abs(float(fd - d_cov[r, k, l] * (2 if k != l else 1))) < tol
        E = torch.zeros_like(mu)
        E[r, k] = eps
        assert abs(float((ell_at(m=mu + E) - ell_at(m=mu - E))[r] / (2 * eps) - d_mu[r, k])) < tol
        assert abs(float((ell_at(v=var + E) - ell_at(v=var - E))[r] / (2 * eps) - d_var[r, k])) < tol
