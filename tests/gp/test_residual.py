"""The item-level residual beside a sparse GP (crowdzoo.gp.residual): recovery of simulated item
effects that the features do not explain, the model's likelihood against its closed form, when
"auto" switches it on, and its posterior's save/load and ArviZ tree."""
import dataclasses
import warnings

import numpy as np
import pyro
import pytest
import torch
from scipy.stats import norm

import crowdzoo as cz
from crowdzoo import PairwiseData
from crowdzoo.errors import DataError
from crowdzoo.gp.linalg import DTYPE
from crowdzoo.models.gppl.model import gppl_model


def _crowd(N, U, P, r_sd, seed, taste=0.0):
    """Items with 2-D features, a smooth utility plus an item effect of sd ``r_sd`` the features do not
    explain, and optionally personal tastes; train and held-out labels drawn from the probit."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (N, 2))
    f = np.sin(X[:, 0]) + 0.5 * np.cos(2 * X[:, 1]) + rng.normal(0, r_sd, N)
    tastes = rng.normal(0, 1, (U, 2)) @ np.stack([np.cos(X[:, 1]), np.sin(X[:, 0])])
    F = f[None, :] + taste * tastes

    def labels(n):
        a = rng.integers(0, N, n)
        b = (a + rng.integers(1, N, n)) % N
        u = rng.integers(0, U, n)
        return a, b, u, (rng.random(n) < norm.cdf(F[u, a] - F[u, b])).astype(float)

    train, test = labels(P), labels(4000)
    return X, train, test, F


def _log_loss(p, y):
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def _win_rate_loss(train, test, N):
    """Held-out log loss of each item's smoothed win rate on the probit scale: counting, no features."""
    a, b, _, y = train
    wins = np.bincount(a, y, N) + np.bincount(b, 1 - y, N)
    n = np.bincount(a, None, N) + np.bincount(b, None, N)
    s = norm.ppf((wins + 1) / (n + 2))
    ta, tb, _, ty = test
    return _log_loss(norm.cdf(s[ta] - s[tb]), ty)


def test_gppl_residual_learns_item_effects_a_sparse_gp_cannot():
    """100 labels per item, 30 inducing items among 300: without the residual GPPL stays far behind
    counting; with it, it beats the win rate and comes near the oracle."""
    N = 300
    X, train, test, F = _crowd(N, 1, 30000, 0.8, seed=0)
    data = PairwiseData.from_arrays(train[0], train[1], train[3], item_features=X)
    ta, tb, _, ty = test
    oracle = _log_loss(norm.cdf(F[0, ta] - F[0, tb]), ty)
    counting = _win_rate_loss(train, test, N)
    loss = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for res in ("auto", False):
            post = cz.fit(cz.GPPL(n_inducing=30, item_residual=res), data, method="natgrad",
                          progress_bar=False)
            loss[res] = _log_loss(post.predict_proba(ta, tb), ty)
            assert (post.r_means is not None) == (res == "auto")
    assert loss[False] > counting + 0.05  # the sparse GP alone cannot carry the item effects
    assert loss["auto"] < counting
    assert loss["auto"] < oracle + 0.03


def test_crowdgppl_residual_learns_item_effects_a_sparse_gp_cannot():
    N = 300
    X, train, test, F = _crowd(N, 100, 30000, 0.8, seed=2, taste=0.6)
    a, b, u, y = train
    data = PairwiseData.from_arrays(a, b, y, item_features=X, users=u)
    ta, tb, tu, ty = test
    oracle = _log_loss(norm.cdf(F[tu, ta] - F[tu, tb]), ty)
    loss = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for res in ("auto", False):
            post = cz.fit(cz.CrowdGPPL(n_components=5, n_inducing=30, item_residual=res), data,
                          progress_bar=False)
            loss[res] = _log_loss(post.predict_proba(ta, tb, users=tu), ty)
    assert loss[False] > _win_rate_loss(train, test, N) + 0.05
    assert loss["auto"] < _win_rate_loss(train, test, N)
    assert loss["auto"] < oracle + 0.03


def test_gppl_model_likelihood_with_residual_is_the_closed_form():
    """The Pyro model's log-likelihood at fixed (u, s, u_r, s_r) equals Σ log Φ(±(d_pᵀ f_m + r_a − r_b) /
    √(1 + c_p / s)), computed here from the kernel directly."""
    X, train, _, _ = _crowd(25, 1, 80, 0.5, seed=4)
    a, b, _, y = train
    data = PairwiseData.from_arrays(a, b, y, item_features=X)
    model = cz.GPPL(n_inducing=6, item_residual=True)
    setup = model.setup(data)
    assert setup.residual_prior is not None
    g = torch.Generator().manual_seed(0)
    vals = {"s": torch.tensor(1.7, dtype=DTYPE), "u": torch.randn(setup.M, generator=g, dtype=DTYPE),
            "s_r": torch.tensor(3.0, dtype=DTYPE), "u_r": torch.randn(25, generator=g, dtype=DTYPE)}
    at, bt, yt = (torch.as_tensor(x) for x in (a, b, y))
    tr = pyro.poutine.trace(pyro.poutine.condition(gppl_model, vals)).get_trace(setup, at, bt, yt)
    got = tr.nodes["y"]["fn"].log_prob(yt).sum()
    Z, Xt, L = setup.Z, setup.X, setup.L_mm  # K_mm = L Lᵀ (with the setup's jitter)
    f_m = L @ vals["u"] / vals["s"].sqrt()
    A = setup.kernel(Xt, Z) @ torch.cholesky_inverse(L)
    cond = setup.kernel(Xt, Xt) - A @ setup.kernel(Z, Xt)
    c = cond[at, at] + cond[bt, bt] - 2 * cond[at, bt]
    r = vals["u_r"] / vals["s_r"].sqrt()
    z = ((A[at] - A[bt]) @ f_m + r[at] - r[bt]) / torch.sqrt(1 + c / vals["s"])
    want = torch.special.log_ndtr(torch.where(yt > 0.5, z, -z)).sum()
    assert float(got) == pytest.approx(float(want), rel=1e-4)


def test_auto_switches_the_residual_on_where_the_item_side_is_sparse():
    X, train, _, _ = _crowd(40, 5, 300, 0.5, seed=5)
    a, b, u, y = train
    pooled = PairwiseData.from_arrays(a, b, y, item_features=X)
    crowd = PairwiseData.from_arrays(a, b, y, item_features=X, users=u)
    from crowdzoo.gp.residual import default_prior

    for m in (cz.GPPL(), cz.CrowdGPPL()):  # one prior, documented in one place
        assert (m.shape_r0, m.rate_r0) == default_prior()
    assert cz.GPPL().setup(pooled).residual_prior is None  # every item inducing: exact
    assert cz.GPPL(n_inducing=10).setup(pooled).residual_prior is not None
    assert cz.GPPL(item_residual=True).setup(pooled).residual_prior is not None
    assert cz.GPPL(n_inducing=10, item_residual=False).setup(pooled).residual_prior is None
    assert cz.CrowdGPPL(n_inducing=10).setup(crowd).residual_prior is not None
    assert cz.CrowdGPPL(n_inducing=10, consensus=False).setup(crowd).residual_prior is None
    assert cz.CrowdGPPL.paper().setup(crowd).residual_prior is None  # the paper's settings pin it off
    with pytest.raises(DataError, match="item_residual"):
        cz.CrowdGPPL(consensus=False, item_residual=True)
    with pytest.raises(DataError, match="item_residual"):
        cz.GPPL(item_residual="yes")
    with pytest.raises(DataError, match="item_residual"):
        cz.fit(cz.GPPL(n_inducing=10, item_residual=True), pooled, method="ep")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = cz.fit(cz.GPPL(n_inducing=10), pooled, method="ep")  # "auto": ep fits without it
    assert post.r_means is None and post.setup.residual_prior is None


@pytest.mark.parametrize("model", ["gppl", "crowdgppl"])
def test_residual_posterior_saves_loads_and_converts(tmp_path, model):
    X, train, _, _ = _crowd(30, 6, 300, 0.5, seed=6)
    a, b, u, y = train
    if model == "gppl":
        data, m, kw = PairwiseData.from_arrays(a, b, y, item_features=X), cz.GPPL(n_inducing=8), {}
    else:
        data = PairwiseData.from_arrays(a, b, y, item_features=X, users=u)
        m, kw = cz.CrowdGPPL(n_components=2, n_inducing=8), {"users": u[:20]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = cz.fit(m, data, progress_bar=False)
    assert post.r_means.shape == (1, 30)
    post.save(tmp_path / "p.pt")
    back = cz.load(tmp_path / "p.pt")
    np.testing.assert_array_equal(back.predict_proba(a[:20], b[:20], **kw),
                                  post.predict_proba(a[:20], b[:20], **kw))
    assert "s_r" in post.to_arviz(n_draws=50).posterior
    # a new item's residual is the prior's: variance 1/E[s_r] above the GP part's
    _, var_new = post.utilities(item_features=X[:3])
    m_off = dataclasses.replace(post, r_means=None, r_vars=None, s_r=None)
    _, var_gp = m_off.utilities(item_features=X[:3])
    np.testing.assert_allclose(var_new.to_numpy() - var_gp.to_numpy(), 1.0 / float(post.s_r[0]), rtol=1e-10)


@pytest.mark.slow
def test_gppl_residual_natgrad_agrees_with_nuts():
    """On a small sparse problem natgrad (exact likelihood) predicts held-out pairs as NUTS does."""
    X, train, test, _ = _crowd(40, 1, 600, 0.8, seed=1)
    data = PairwiseData.from_arrays(train[0], train[1], train[3], item_features=X)
    ta, tb, _, ty = test
    m = cz.GPPL(n_inducing=8, item_residual=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nat = cz.fit(m, data, method="natgrad", likelihood="exact", progress_bar=False)
        nuts = cz.fit(m, data, method="nuts", num_samples=300, warmup_steps=300, progress_bar=False)
        off = cz.fit(cz.GPPL(n_inducing=8, item_residual=False), data, method="nuts", num_samples=300,
                     warmup_steps=300, progress_bar=False)
    p_nat, p_nuts = nat.predict_proba(ta, tb), nuts.predict_proba(ta, tb)
    assert np.mean(np.abs(p_nat - p_nuts)) < 0.03
    assert abs(_log_loss(p_nat, ty) - _log_loss(p_nuts, ty)) < 0.01
    assert _log_loss(p_nuts, ty) < _log_loss(off.predict_proba(ta, tb), ty) - 0.05
