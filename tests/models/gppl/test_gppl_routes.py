"""GPPL: each inference route against independent ones on one small simulated problem."""
import math

import numpy as np
import pytest
import torch
from scipy.stats import kendalltau

import crowdzoo as cz
from crowdzoo.inference.ep import ep_fixed_s


def test_ep_means_agree_with_nuts(fits):
    m_n, v_n = fits["nuts"].utilities()
    m_e, _ = fits["ep"].utilities()
    z = np.abs(m_e - m_n) / np.sqrt(v_n)
    assert np.mean(z < 0.2) >= 0.9, z.describe()


@pytest.mark.parametrize("route", ["svi", "ep", "natgrad_exact"])
def test_heldout_probabilities_match_nuts(gaps, route):
    assert gaps[route] < 0.04, gaps


def test_exact_likelihood_natgrad_closes_the_linearisation_gap(gaps):
    # the paper's linearised route is measured, not hidden: its gap is reported in docs
    print("held-out mean |P - P_NUTS|:", gaps)
    assert gaps["natgrad_exact"] < gaps["natgrad"]
    assert gaps["natgrad"] < 0.15


@pytest.mark.parametrize("route", ["nuts", "ep", "svi", "natgrad", "natgrad_exact"])
def test_probabilities_are_complementary(fits, problem, route):
    t = problem["test"]
    ids = t.item_ids
    p_ab = fits[route].predict_proba(ids[t.a], ids[t.b])
    p_ba = fits[route].predict_proba(ids[t.b], ids[t.a])
    np.testing.assert_allclose(p_ab + p_ba, 1.0, atol=1e-12)
    assert ((p_ab > 0) & (p_ab < 1)).all()


@pytest.mark.parametrize("route", ["ep", "svi", "natgrad", "natgrad_exact"])
def test_ranking_as_good_as_nuts(fits, problem, route):
    tau_nuts = kendalltau(problem["f"], fits["nuts"].utilities()[0]).statistic
    tau = kendalltau(problem["f"], fits[route].utilities()[0]).statistic
    assert tau_nuts > 0.6
    assert tau > tau_nuts - 0.05, (tau, tau_nuts)


def test_nuts_has_no_divergences_and_mixes(fits):
    post = fits["nuts"]
    assert post.sample_stats["diverging"].sum() <= 2
    s = post.s.reshape(post.n_chains, -1)
    # the two chains agree on E[s] within their spread
    assert abs(float(s[0].mean() - s[1].mean())) < 0.5 * float(post.s.std())


def test_ep_evidence_matches_monte_carlo():
    """log p(y | s) from EP against a brute-force prior Monte Carlo estimate (5 items)."""
    data, _ = cz.simulate_gppl(n_items=5, n_pairs=8, seed=11)
    setup = cz.GPPL().setup(data)
    a, b = torch.tensor(data.a), torch.tensor(data.b)
    sgn = 2.0 * torch.tensor(data.y) - 1.0
    s = 0.7
    H = torch.zeros(len(a), 5, dtype=torch.float64)
    H[torch.arange(len(a)), a] = 1.0
    H[torch.arange(len(a)), b] = -1.0
    *_, log_z, _ = ep_fixed_s(setup.K_mm / s, H, sgn)
    g = torch.Generator().manual_seed(0)
    L = torch.linalg.cholesky(setup.K_mm / s)
    f = torch.randn(400_000, 5, dtype=torch.float64, generator=g) @ L.T
    log_lik = torch.special.log_ndtr(sgn * (f[:, a] - f[:, b])).sum(-1)
    log_mc = float(torch.logsumexp(log_lik, 0) - math.log(f.shape[0]))
    assert abs(log_z - log_mc) < 0.05, (log_z, log_mc)


def test_sparse_with_all_items_equals_exact(problem):
    d = problem["train"]
    exact = cz.fit(cz.GPPL(), d, method="ep", s_mode="max")
    model = cz.GPPL()
    # inducing inputs = the training items, but through the sparse code path (c_p computed)
    setup = model.setup(d, inducing=d.item_features.copy())
    sparse = cz.fit(model, d, method="ep", s_mode="max", setup=setup)
    assert not sparse.setup.exact
    t = problem["test"]
    np.testing.assert_allclose(sparse.predict_proba(t.item_ids[t.a], t.item_ids[t.b]),
                               exact.predict_proba(t.item_ids[t.a], t.item_ids[t.b]), atol=1e-4)


def test_minibatch_natgrad_reaches_full_batch_solution(problem):
    d = problem["train"]
    full = cz.fit(cz.GPPL(n_inducing=15), d, method="natgrad", likelihood="exact", learn_kernel=False)
    mini = cz.fit(cz.GPPL(n_inducing=15), d, method="natgrad", likelihood="exact", learn_kernel=False,
                  batch_size=60, max_iter=1500, tol=1e-5)
    t = problem["test"]
    p_full = full.predict_proba(t.item_ids[t.a], t.item_ids[t.b])
    p_mini = mini.predict_proba(t.item_ids[t.a], t.item_ids[t.b])
    assert np.abs(p_full - p_mini).mean() < 0.03


def test_new_items(fits, problem):
    post = fits["ep"]
    X = problem["train"].item_features
    # the training items passed as new features give the training predictions
    p_new = post.predict_proba([0, 1, 2], [3, 4, 5], item_features=X)
    p_old = post.predict_proba(post.data.item_ids[[0, 1, 2]], post.data.item_ids[[3, 4, 5]])
    np.testing.assert_allclose(p_new, p_old, atol=1e-6)
    # items far from all data revert to the prior: P ≈ ½ and variance ≈ E[1/s]
    far = np.array([[1e3, 1e3], [-1e3, 1e3]])
    assert abs(post.predict_proba([0], [1], item_features=far)[0] - 0.5) < 1e-6


@pytest.mark.parametrize("route", ["nuts", "ep", "svi", "natgrad"])
def test_save_load_round_trip(fits, problem, route, tmp_path):
    post = fits[route]
    path = tmp_path / f"{route}.pt"
    post.save(path)
    back = cz.load(path)
    t = problem["test"]
    ids = t.item_ids
    np.testing.assert_array_equal(back.predict_proba(ids[t.a], ids[t.b]),
                                  post.predict_proba(ids[t.a], ids[t.b]))
    m0, v0 = post.utilities()
    m1, v1 = back.utilities()
    np.testing.assert_array_equal(m0.values, m1.values)
    np.testing.assert_array_equal(v0.values, v1.values)


def test_sample_matches_utilities(fits):
    post = fits["natgrad"]
    draws = post.sample(4000, seed=1)
    mean, var = post.utilities()
    se = np.sqrt(var.values / 4000)
    assert np.mean(np.abs(draws["f"].mean(0).numpy() - mean.values) < 4 * se) > 0.95
    assert draws["s"].shape == (4000,)
    assert abs(float(draws["s"].mean()) - float(post.s[0])) < 0.1 * float(post.s[0])
    again = post.sample(4000, seed=1)  # the seed fixes every draw, q(s)'s included
    assert all(torch.equal(draws[k], again[k]) for k in draws)


@pytest.mark.parametrize("route", ["nuts", "natgrad"])
def test_to_arviz_groups_and_labels(fits, route):
    dt = fits[route].to_arviz(n_draws=200)
    for group in ("posterior", "posterior_predictive", "log_likelihood", "observed_data"):
        assert group in dt.children, group
    post = dt["posterior"]
    assert list(post["f"].dims) == ["chain", "draw", "item"]
    np.testing.assert_array_equal(post["item"].values, fits[route].data.item_ids)
    if route == "nuts":
        assert "sample_stats" in dt.children
        assert post.sizes["chain"] == 2
    else:
        assert "optimisation" in dt.children
        assert dt.attrs["approximate"] == 1


def test_natgrad_resume_continues_the_run(problem, tmp_path):
    d = problem["train"]
    model = cz.GPPL(n_inducing=15)
    # full batches: the run is deterministic, so resuming must reproduce it
    whole = cz.fit(model, d, method="natgrad", max_iter=40, tol=0, seed=4)
    first = cz.fit(model, d, method="natgrad", max_iter=20, tol=0, seed=4)
    first.save(tmp_path / "ckpt.pt")
    # max_iter counts the whole run, resumed or not; the seed comes from the checkpoint
    resumed = cz.fit(model, d, method="natgrad", max_iter=40, tol=0, seed=5,
                     resume=cz.load(tmp_path / "ckpt.pt"))
    assert resumed.settings["iterations"] == 40
    t = problem["test"]
    p_w = whole.predict_proba(t.item_ids[t.a], t.item_ids[t.b])
    p_r = resumed.predict_proba(t.item_ids[t.a], t.item_ids[t.b])
    np.testing.assert_allclose(p_r, p_w, atol=1e-8)
    np.testing.assert_allclose(resumed.trace["bound"], whole.trace["bound"], rtol=1e-8)
