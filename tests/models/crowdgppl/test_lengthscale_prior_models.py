"""svi and nuts for crowdGPPL and the DPM: the item (and user) length-scales under a prior
(``lengthscale_prior=``, ``user_lengthscale_prior=``), sampled by NUTS and covered by svi's guide, the
posterior predicting with each draw's kernels.

On simulated ARD problems (the utilities depend on the first of two features only) the irrelevant
dimension's length-scale ends clearly above the relevant one's, by svi and by NUTS, which agree on the
relevant one; the per-draw predictions equal a loop over draws, each a one-component posterior on its own
setup; ArviZ shows the length-scales; routes that would ignore a prior refuse it.
"""
from __future__ import annotations

import numpy as np
import pyro.distributions as dist
import pytest
import torch
from scipy.stats import norm
from test_learn_kernel_crowd import _ard_crowd as ard_crowd_arrays

import crowdzoo as cz
from crowdzoo.core.posterior import uniform_weights
from crowdzoo.errors import DataError
from crowdzoo.models.crowdgppl.posterior import CrowdGPPLPosterior

PRIOR = dist.LogNormal(0.0, 1.0)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _pairs(rng, N, P):
    a = rng.integers(N, size=P)
    return a, (a + 1 + rng.integers(N - 1, size=P)) % N


def _ard_crowd(seed=0, N=30, U=10, P=500):
    """Consensus sin(1.5 x₀) and two components of x₀ alone on x ~ U(−2, 2)²; x₁ is irrelevant."""
    X, a, b, j, y = ard_crowd_arrays(seed, N, U, P)
    return cz.PairwiseData.from_arrays(a, b, y, item_features=X, users=j)


def _ard_communities(seed=0, N=15, U=6, L=30):
    """Two communities (users alternate) with utilities 2 sin(1.5 x₀) and 2 cos(1.5 x₀); x₁ irrelevant."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (N, 2))
    F = 2.0 * np.stack([np.sin(1.5 * X[:, 0]), np.cos(1.5 * X[:, 0])])
    users = np.repeat(np.arange(U), L)
    a, b = _pairs(rng, N, U * L)
    f = F[users % 2]
    rows = np.arange(U * L)
    y = (rng.random(U * L) < norm.cdf(f[rows, a] - f[rows, b])).astype(float)
    return cz.PairwiseData.from_arrays(a, b, y, item_features=X, users=users)


# ---------------------------------------------------------------------------------------------- crowdGPPL
@pytest.fixture(scope="module")
def crowd_svi():
    return cz.fit(cz.CrowdGPPL(n_components=2, n_inducing=None, kernel="se", lengthscale_prior=PRIOR),
                  _ard_crowd(), method="svi", num_steps=1000, lr=0.03, n_draws=200, progress_bar=False)


def test_crowd_svi_puts_the_longer_lengthscale_on_the_irrelevant_dimension(crowd_svi):
    """svi (the mean-field guide with q(log ℓ) a full Gaussian): posterior mean ℓ₁ at least 2.5 × ℓ₀; the
    draws differ; ArviZ has ``lengthscale`` (chain, draw, dim) among the identified variables; the
    posterior predicts consensus and personal preferences."""
    post = crowd_svi
    ell = post.lengthscales
    mean = ell.mean(0)
    print(f"crowdGPPL svi: posterior mean ℓ {mean.numpy().round(3)}, sd {ell.std(0).numpy().round(3)}")
    assert ell.shape == (200, 2) and bool((ell > 0).all()) and bool((ell.std(0) > 0).all())
    assert mean[1] > 2.5 * mean[0]
    assert post.user_lengthscales is None  # independent users: no user kernel
    dt = post.to_arviz()
    da = dt.posterior["lengthscale"]
    assert da.dims == ("chain", "draw", "dim") and da.shape == (1, 200, 2)
    assert "lengthscale" in dt.attrs["identified"].split()
    ids, users = post.data.item_ids, post.data.user_ids
    pa, pb = ids[:8], ids[8:16]
    for p in (post.predict_proba(pa, pb), post.predict_proba(pa, pb, users=users[:8])):
        assert p.shape == (8,) and np.all((p > 0) & (p < 1))
    np.testing.assert_allclose(post.predict_proba(pa, pb) + post.predict_proba(pb, pa), 1.0, atol=1e-12)


@pytest.fixture(scope="module")
def tiny_crowd():
    return _ard_crowd(N=12, U=3, P=200)


@pytest.mark.slow  # NUTS over the crowd's length-scales: about a minute; svi's ARD test above stays fast
def test_crowd_nuts_samples_the_lengthscales_and_agrees_with_svi(tiny_crowd):
    """NUTS (2 short chains, tree depth ≤ 5) on 12 items, 3 users, 200 labels: ℓ draws positive and
    varying, median ℓ₁ at least 2.5 × median ℓ₀ (svi's: 2 ×); svi's median ℓ₀ within a factor 2 of NUTS's
    (the mean-field guide sits at the smoother end of NUTS's 90 % interval)."""
    model = cz.CrowdGPPL(n_components=1, n_inducing=None, kernel="se", lengthscale_prior=PRIOR)
    nuts = cz.fit(model, tiny_crowd, method="nuts", num_samples=50, warmup_steps=50, num_chains=2,
                  max_tree_depth=5)
    svi = cz.fit(model, tiny_crowd, method="svi", num_steps=1000, lr=0.03, n_draws=200, progress_bar=False)
    ell = nuts.lengthscales
    med_n, med_s = ell.median(0).values, svi.lengthscales.median(0).values
    lo, hi = np.quantile(ell[:, 0].numpy(), [0.05, 0.95])
    print(f"crowdGPPL posterior median ℓ: NUTS {med_n.numpy().round(3)} (ℓ₀ 90 % interval ({lo:.3f}, "
          f"{hi:.3f})), svi {med_s.numpy().round(3)}; divergences "
          f"{int(nuts.sample_stats['diverging'].sum())}")
    assert ell.shape == (100, 2) and bool((ell > 0).all()) and bool((ell.std(0) > 0).all())
    assert med_n[1] > 2.5 * med_n[0] and med_s[1] > 2 * med_s[0]
    assert 0.5 < float(med_s[0] / med_n[0]) < 2
    assert nuts.to_arviz().posterior["lengthscale"].shape == (2, 50, 2)


def _loop_over_draws(post, a, b, **kw):
    """P(a ≻ b) averaged over draws, each draw a one-component posterior of the fixed-kernel code path on
    its own setup (``with_lengthscales``: K_mm, L_mm and the projections rebuilt at that draw's ℓ)."""
    out = []
    for g in range(post.weights.shape[0]):
        ell = post.lengthscales[g]
        ell_u = None if post.user_lengthscales is None else post.user_lengthscales[g]
        model, setup = post.model.with_lengthscales(post.setup, ell, ell_u)
        names = ("t_m", "v_m", "w_m", "s_t", "s_v", "s_w", "r_means", "s_r")
        draw = {k: getattr(post, k)[g:g + 1] for k in names if getattr(post, k) is not None}
        one = CrowdGPPLPosterior(model=model, setup=setup, data=post.data, method="x",
                                 weights=uniform_weights(1), **draw)
        out.append(one.predict_proba(a, b, **kw))
    return np.mean(out, axis=0)


def test_crowd_per_draw_predictions_equal_a_loop_over_draws():
    """Item and user kernels under priors, sparse on both sides (so the conditional variances enter):
    consensus and personal P(a ≻ b), at training and at new items and users, equal a loop over draws
    through the fixed-kernel code path to 1e-10; utilities' means are the means of ``sample``'s draws
    within their spread; ``sample`` returns the draws' length-scales."""
    data, _ = cz.simulate_crowd(n_items=20, n_users=8, n_pairs=300, n_components=2, seed=2)
    model = cz.CrowdGPPL(n_components=2, n_inducing=8, n_inducing_users=5, kernel="se",
                         lengthscale_prior=PRIOR, user_lengthscale_prior=dist.LogNormal(0.0, 0.5))
    post = cz.fit(model, data, method="svi", num_steps=150, lr=0.02, n_draws=12, progress_bar=False)
    assert post.lengthscales.shape == (12, 2) and post.user_lengthscales.shape == (12, 2)
    assert post.user_lengthscales.std(0).min() > 0
    ids, users = data.item_ids, data.user_ids
    a, b, j = ids[:10], ids[10:20], users[np.arange(10) % 8]
    np.testing.assert_allclose(post.predict_proba(a, b), _loop_over_draws(post, a, b), atol=1e-10)
    np.testing.assert_allclose(post.predict_proba(a, b, users=j), _loop_over_draws(post, a, b, users=j),
                               atol=1e-10)
    rng = np.random.default_rng(3)
    new_x, new_u = rng.uniform(0, 1, (5, 2)), rng.uniform(0, 1, (3, 2))
    kw = dict(users=[0, 1, 2, 0], item_features=new_x, user_features=new_u)
    ia, ib = np.array([0, 1, 2, 3]), np.array([4, 0, 1, 2])
    np.testing.assert_allclose(post.predict_proba(ia, ib, **kw), _loop_over_draws(post, ia, ib, **kw),
                               atol=1e-10)
    draws = post.sample(12)
    assert torch.equal(draws["lengthscale"], post.lengthscales)
    assert torch.equal(draws["user_lengthscale"], post.user_lengthscales)
    mean, var = post.utilities()
    np.testing.assert_allclose(mean.to_numpy(), draws["t"].mean(0).numpy(), atol=3 * float(var.max()) ** 0.5)
    dt = post.to_arviz()
    assert dt.posterior["user_lengthscale"].dims == ("chain", "draw", "user_dim")


def test_crowd_priors_refused_where_ignored_or_impossible(tiny_crowd):
    """natgrad without learn_kernel, a user prior without a user kernel, an item prior without item
    features, learn_kernel with a prior, and non-positive priors: DataErrors naming the argument."""
    data = tiny_crowd
    with pytest.raises(DataError, match="lengthscale_prior"):
        cz.fit(cz.CrowdGPPL(n_components=1, lengthscale_prior=PRIOR), data, method="natgrad")
    with pytest.raises(DataError, match="user_lengthscale_prior"):
        cz.fit(cz.CrowdGPPL(n_components=1, user_lengthscale_prior=PRIOR), data, method="natgrad")
    with pytest.raises(DataError, match="user_lengthscale_prior"):  # independent users: no user kernel
        cz.fit(cz.CrowdGPPL(n_components=1, user_lengthscale_prior=PRIOR), data, method="svi", num_steps=1)
    with pytest.raises(DataError, match="lengthscale_prior"):  # identity item kernel
        cz.fit(cz.CrowdGPPL(n_components=1, item_features=False, lengthscale_prior=PRIOR), data,
               method="nuts", num_samples=1, warmup_steps=1)
    with pytest.raises(DataError, match="learn_kernel"):
        cz.fit(cz.CrowdGPPL(n_components=1, lengthscale_prior=PRIOR), data, method="svi", learn_kernel=True,
               num_steps=1)
    with pytest.raises(DataError, match="user_lengthscale_prior"):
        cz.CrowdGPPL(user_lengthscale_prior=dist.Normal(0.0, 1.0))


def test_crowd_fixed_kernels_keep_the_fixed_program(tiny_crowd):
    """Without priors the program is the fixed-kernel model (no length-scale site); with one, the sampled
    side's prior has event shape (D,) and the other side stays fixed."""
    from crowdzoo.models.crowdgppl.model import crowdgppl_lengthscale_model, crowdgppl_model

    model = cz.CrowdGPPL(n_components=1, n_inducing=None)
    setup = model.setup(tiny_crowd)
    assert model.program(setup, tiny_crowd)[0] is crowdgppl_model
    with_prior = cz.CrowdGPPL(n_components=1, n_inducing=None, lengthscale_prior=PRIOR)
    fn, args = with_prior.program(setup, tiny_crowd)
    assert fn is crowdgppl_lengthscale_model
    assert args[0].prior.event_shape == (2,) and args[0].users is None


# ---------------------------------------------------------------------------------------------------- DPM
@pytest.fixture(scope="module")
def communities():
    return _ard_communities()


def test_dpm_svi_and_nuts_infer_the_lengthscales(communities):
    """svi (AutoNormal, ℓ started at the median heuristic) and NUTS (2 short chains): posterior median ℓ₁
    at least 2.5 × ℓ₀; svi's median ℓ₀ inside NUTS's 5–95 % interval; ArviZ shows ``lengthscale``; the
    two communities are found; predictions are probabilities."""
    model = cz.DPMCommunities(kernel="se", truncation=3, lengthscale_prior=PRIOR)
    svi = cz.fit(model, communities, method="svi", num_steps=1000, lr=0.05, progress_bar=False)
    nuts = cz.fit(model, communities, method="nuts", num_samples=40, warmup_steps=40, num_chains=2,
                  max_tree_depth=5)
    med_s, med_n = svi.lengthscales.median(0).values, nuts.lengthscales.median(0).values
    lo, hi = np.quantile(nuts.lengthscales[:, 0].numpy(), [0.05, 0.95])
    print(f"DPM posterior median ℓ: svi {med_s.numpy().round(3)}, NUTS {med_n.numpy().round(3)} (ℓ₀ 90 % "
          f"interval ({lo:.3f}, {hi:.3f})); svi P(2 communities) {svi.n_communities().get(2, 0.0):.2f}")
    for post in (svi, nuts):
        ell = post.lengthscales
        assert bool((ell > 0).all()) and bool((ell.std(0) > 0).all())
        assert ell.median(0).values[1] > 2.5 * ell.median(0).values[0]
    assert lo < float(med_s[0]) < hi
    assert svi.n_communities().idxmax() == 2
    dt = nuts.to_arviz()
    assert dt.posterior["lengthscale"].dims == ("chain", "draw", "dim")
    assert dt.posterior["lengthscale"].shape == (2, 40, 2)
    ids, users = communities.item_ids, communities.user_ids
    p = svi.predict_proba(ids[:6], ids[6:12], users=users[:6])
    assert np.all((p > 0) & (p < 1))


def test_dpm_per_draw_predictions_equal_a_loop_over_draws(communities):
    """Sparse (6 inducing items): predict_proba (known users, new users, new items) and utilities equal
    the average of one-draw posteriors, each on a setup built at its draw's ℓ (``with_lengthscale``)."""
    from crowdzoo.models.dpm.posterior import DPMPosterior

    model = cz.DPMCommunities(kernel="se", truncation=3, n_inducing=6, lengthscale_prior=PRIOR)
    post = cz.fit(model, communities, method="svi", num_steps=100, lr=0.05, n_draws=8, progress_bar=False)
    a_t, b_t = (torch.as_tensor(x) for x in (communities.a, communities.b))
    ids, users = communities.item_ids, communities.user_ids
    new = np.random.default_rng(2).uniform(-2, 2, (5, 2))
    calls = [lambda p: p.predict_proba(ids[:6], ids[6:12], users=list(users[:5]) + ["nobody"],
                                       new_users="prior"),
             lambda p: p.predict_proba([0, 1], [2, 3], users=users[0], item_features=new),
             lambda p: p.utilities(users=list(users[:2]))[0].to_numpy()]
    loops = [[] for _ in calls]
    for g in range(8):
        m, setup = post.model.with_lengthscale(post.setup, post.lengthscales[g], a_t, b_t)
        one = DPMPosterior(model=m, setup=setup, data=communities, method="x", weights=uniform_weights(1),
                           z=post.z[g:g + 1], means=post.means[g:g + 1], covs=None,
                           counts=post.counts[g:g + 1],
                           concentration=post.concentration[g:g + 1],
                           responsibilities=post.responsibilities[g:g + 1])
        for out, call in zip(loops, calls):
            out.append(call(one))
    for out, call in zip(loops, calls):
        np.testing.assert_allclose(call(post), np.mean(out, axis=0), atol=1e-10)
    assert torch.equal(post.sample(8)["lengthscale"], post.lengthscales)


def test_dpm_gibbs_refuses_the_prior(communities):
    """Gibbs keeps the kernel fixed: a DataError naming lengthscale_prior; so do a non-positive prior and
    learn_kernel together with a prior."""
    with pytest.raises(DataError, match="lengthscale_prior"):
        cz.fit(cz.DPMCommunities(lengthscale_prior=PRIOR), communities, method="gibbs", n_sweeps=2)
    with pytest.raises(DataError, match="lengthscale_prior"):
        cz.DPMCommunities(lengthscale_prior=dist.Normal(0.0, 1.0))
    with pytest.raises(DataError, match="learn_kernel"):
        cz.fit(cz.DPMCommunities(kernel="se", lengthscale_prior=PRIOR), communities, method="svi",
               learn_kernel=True, num_steps=1)
