"""Learned kernels by svi and nuts for collabGP: the item (and user) ARD length-scales under a prior
(``lengthscale_prior=``, ``user_lengthscale_prior=``), sampled by NUTS and covered by svi's guide, the
posterior predicting with each draw's kernels; svi's ``learn_kernel=True`` makes them ``pyro.param`` s.

On a simulated collaborative problem whose latent functions depend on the first of two item features only
(and whose user weights on the first of two user features), the irrelevant item dimension's length-scale
ends clearly above the relevant one's, by svi and by NUTS; the per-draw predictions equal a loop over
draws, each a one-component posterior of the fixed-kernel code path on its own setup; ArviZ shows the
length-scales; the ep route refuses a prior. ``pytest -s`` prints the measured values (docs/collabgp.md).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pyro.distributions as dist
import pytest
import torch
from scipy.stats import norm

import crowdzoo as cz
from crowdzoo.core.posterior import uniform_weights
from crowdzoo.errors import DataError
from crowdzoo.models.collabgp.posterior import CollabGPPosterior

PRIOR = dist.LogNormal(0.0, 1.0)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One thread for these tiny matrices (two threads only add synchronisation here)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _ard_collab(seed=0, N=30, U=10, P=500):
    """Latent functions sin(1.5 x₀) and cos(1.5 x₀) of items x ~ U(−2, 2)² (x₁ irrelevant), user weights
    (1, sign(u₀)) of user features u ~ U(−2, 2)² (u₁ irrelevant); P(a ≻ b | user) = Φ(2 (g_a − g_b))."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (N, 2))
    H = np.stack([np.sin(1.5 * X[:, 0]), np.cos(1.5 * X[:, 0])])  # (2, N)
    UF = rng.uniform(-2, 2, (U, 2))
    F = np.stack([np.ones(U), np.sign(UF[:, 0])], 1) @ H  # (U, N)
    a = rng.integers(N, size=P)
    b = (a + 1 + rng.integers(N - 1, size=P)) % N
    j = rng.integers(U, size=P)
    y = (rng.random(P) < norm.cdf(2.0 * (F[j, a] - F[j, b]))).astype(float)
    return cz.PairwiseData.from_arrays(a, b, y, item_features=X, users=j, user_features=UF)


@pytest.fixture(scope="module")
def collab():
    return _ard_collab()


@pytest.fixture(scope="module")
def collab_svi(collab):
    model = cz.CollabGP(n_latent=2, lengthscale_prior=PRIOR, user_lengthscale_prior=PRIOR)
    return cz.fit(model, collab, method="svi", num_steps=1000, lr=0.03, n_draws=200, progress_bar=False)


@pytest.mark.slow  # the 1,000-step svi fit takes 15 s; nuts checks the same ordering below
def test_svi_puts_the_longer_lengthscale_on_the_irrelevant_dimension(collab_svi, tmp_path):
    """svi (AutoNormal, log ℓ started at the median distance): posterior mean ℓ₁ at least 2 × ℓ₀ for the
    items; the draws differ; ArviZ has ``lengthscale`` (chain, draw, dim) and ``user_lengthscale``
    (user_dim) among the identified variables; save and load keep the draws' length-scales and the
    predictions."""
    post = collab_svi
    ell, ell_u = post.lengthscales, post.user_lengthscales
    mean, mean_u = ell.mean(0), ell_u.mean(0)
    print(f"collabGP svi: posterior mean ℓ {mean.numpy().round(3)} (sd {ell.std(0).numpy().round(3)}), "
          f"user ℓ {mean_u.numpy().round(3)}; start (median distance) "
          f"{post.setup.items.kernel.lengthscale.numpy().round(3)}")
    assert ell.shape == (200, 2) and ell_u.shape == (200, 2)
    assert bool((ell > 0).all()) and bool((ell.std(0) > 0).all()) and bool((ell_u.std(0) > 0).all())
    assert mean[1] > 2 * mean[0]
    dt = post.to_arviz()
    assert dt.posterior["lengthscale"].dims == ("chain", "draw", "dim")
    assert dt.posterior["lengthscale"].shape == (1, 200, 2)
    assert dt.posterior["user_lengthscale"].dims == ("chain", "draw", "user_dim")
    assert {"lengthscale", "user_lengthscale"} <= set(dt.attrs["identified"].split())
    ids, users = post.data.item_ids, post.data.user_ids
    p = post.predict_proba(ids[:8], ids[8:16], users=users[:8])
    assert p.shape == (8,) and np.all((p > 0) & (p < 1))
    post.save(tmp_path / "collab.pt")
    back = cz.load(tmp_path / "collab.pt")
    assert torch.equal(back.lengthscales, ell) and torch.equal(back.user_lengthscales, ell_u)
    np.testing.assert_array_equal(back.predict_proba(ids[:8], ids[8:16], users=users[:8]), p)


def test_nuts_samples_the_lengthscales_and_agrees_on_the_ordering():
    """NUTS (2 chains of 50 draws, tree depth ≤ 5) on 12 items, 4 users, 200 labels, D = 1: ℓ draws
    positive and varying, median ℓ₁ at least 2 × median ℓ₀, as svi's on the larger problem."""
    data = _ard_collab(N=12, U=4, P=200)
    nuts = cz.fit(cz.CollabGP(n_latent=1, lengthscale_prior=PRIOR), data, method="nuts", num_samples=50,
                  warmup_steps=50, num_chains=2, max_tree_depth=5)
    ell = nuts.lengthscales
    med = ell.median(0).values
    lo, hi = np.quantile(ell[:, 0].numpy(), [0.05, 0.95])
    print(f"collabGP NUTS: posterior median ℓ {med.numpy().round(3)} (ℓ₀ 90 % interval ({lo:.3f}, "
          f"{hi:.3f})); divergences {int(nuts.sample_stats['diverging'].sum())}")
    assert ell.shape == (100, 2) and bool((ell > 0).all()) and bool((ell.std(0) > 0).all())
    assert nuts.user_lengthscales is None
    assert med[1] > 2 * med[0]
    assert nuts.to_arviz().posterior["lengthscale"].shape == (2, 50, 2)


def _one_draw(post, g, sites=None):
    """Draw g as a one-component posterior of the fixed-kernel code path on its own setup
    (``with_lengthscales``: L_zz and the bases rebuilt at that draw's ℓ); with ``sites`` through
    ``from_draws`` (w at the training users from that setup's Φ_w, δ_w). Each draw carries its own
    scales 1/s_d of h_d (``h_scale``, site "s_h")."""
    model, setup = post.model.with_lengthscales(post.setup, post.lengthscales[g], post.user_lengthscales[g])
    model = dataclasses.replace(model, lengthscale_prior=None, user_lengthscale_prior=None)
    if sites is not None:
        one = {k: v[g:g + 1] for k, v in sites.items() if "lengthscale" not in k}
        return CollabGPPosterior.from_draws(model, setup, post.data, one, "x")
    return CollabGPPosterior(model=model, setup=setup, data=post.data, method="x", weights=uniform_weights(1),
                             a_mean=post.a_mean[g:g + 1], a_cov=None, w_mean=post.w_mean[g:g + 1], w_var=None,
                             b_mean=post.b_mean[g:g + 1],
                             h_scale=None if post.h_scale is None else post.h_scale[g:g + 1])


def test_per_draw_predictions_equal_a_loop_over_draws(collab):
    """FITC on both sides (12 pseudo pairs, 5 pseudo users: the residual variances δ enter), item and user
    length-scales under priors: P(a ≻ b | user) at training items and users and at new items and users
    equals the average of one-draw posteriors on their own setups to 1e-10; ``from_draws``' per-draw w
    equals the loop's; ``sample`` returns the draws' length-scales."""
    model = cz.CollabGP(n_latent=2, n_pseudo_pairs=12, n_pseudo_users=5, lengthscale_prior=PRIOR,
                        user_lengthscale_prior=dist.LogNormal(0.0, 0.5))
    post = cz.fit(model, collab, method="svi", num_steps=150, lr=0.02, n_draws=8, progress_bar=False)
    assert post.lengthscales.shape == (8, 2) and post.user_lengthscales.std(0).min() > 0
    ids, users = collab.item_ids, collab.user_ids
    rng = np.random.default_rng(3)
    new_x, new_u = rng.uniform(-2, 2, (5, 2)), rng.uniform(-2, 2, (3, 2))
    calls = [lambda p: p.predict_proba(ids[:10], ids[10:20], users=users[np.arange(10) % 10]),
             lambda p: p.predict_proba([0, 1, 2, 3], [4, 0, 1, 2], users=[0, 1, 2, 0], item_features=new_x,
                                       user_features=new_u)]
    loops = [np.mean([call(_one_draw(post, g)) for g in range(8)], axis=0) for call in calls]
    gaps = [float(np.abs(call(post) - loop).max()) for call, loop in zip(calls, loops)]
    e_w = torch.randn(8, collab.n_users, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    sites = {"a": post.a_mean, "b": post.b_mean, "e_w": e_w, "lengthscale": post.lengthscales,
             "user_lengthscale": post.user_lengthscales}
    w = CollabGPPosterior.from_draws(post.model, post.setup, collab, sites, "x").w_mean
    w_loop = torch.cat([_one_draw(post, g, sites).w_mean for g in range(8)])
    print(f"collabGP per-draw predictions against the loop over draws: largest gaps {gaps}, w "
          f"{float((w - w_loop).abs().max()):.1e}")
    assert max(gaps) < 1e-10 and torch.allclose(w, w_loop, atol=1e-10, rtol=0)
    draws = post.sample(8)
    assert torch.equal(draws["lengthscale"], post.lengthscales)
    assert torch.equal(draws["user_lengthscale"], post.user_lengthscales)
    assert draws["h"].shape == (8, 2, post.setup.P)


def test_svi_learn_kernel_moves_the_lengthscales(collab):
    """Without a prior, svi's ``learn_kernel=True`` makes the item and user ARD length-scales
    ``pyro.param`` s started at the median distance: they move off the start (the irrelevant item
    dimension's up), the posterior's setup and model carry them, and no per-draw ℓ is kept."""
    post = cz.fit(cz.CollabGP(n_latent=2), collab, method="svi", learn_kernel=True, num_steps=400, lr=0.03,
                  n_draws=20, progress_bar=False)
    s = post.settings
    start, got = np.array(s["start_lengthscale"]), np.array(s["learned_lengthscale"])
    print(f"collabGP svi learn_kernel: item ℓ {start.round(3)} → {got.round(3)}, user ℓ "
          f"{np.round(s['start_user_lengthscale'], 3)} → {np.round(s['learned_user_lengthscale'], 3)}")
    assert np.abs(np.log(got / start)).max() > 0.2 and got[1] > got[0]
    assert np.abs(np.log(np.array(s["learned_user_lengthscale"]) / s["start_user_lengthscale"])).max() > 0.05
    assert post.lengthscales is None
    np.testing.assert_allclose(post.setup.items.kernel.lengthscale.numpy(), got)
    np.testing.assert_allclose(np.asarray(post.model.lengthscale), got)
    p = post.predict_proba(collab.item_ids[:4], collab.item_ids[4:8], users=collab.user_ids[:4])
    assert np.all((p > 0) & (p < 1))


def test_priors_refused_where_ignored_or_impossible(collab):
    """ep (which keeps ℓ fixed or maximises its evidence), a user prior without a user GP, an item prior
    without item features, learn_kernel with a prior, and non-positive priors: DataErrors naming the
    argument; without priors the program is the fixed-kernel model."""
    from crowdzoo.models.collabgp.model import collabgp_lengthscale_model, collabgp_model

    small = collab.subset(np.arange(60))
    for name in ("lengthscale_prior", "user_lengthscale_prior"):
        with pytest.raises(DataError, match=name):
            cz.fit(cz.CollabGP(n_latent=1, **{name: PRIOR}), small, method="ep", max_iter=1)
    with pytest.raises(DataError, match="user_lengthscale_prior"):
        cz.fit(cz.CollabGP(n_latent=1, user_features=False, user_lengthscale_prior=PRIOR), small,
               method="svi", num_steps=1)
    bare = cz.PairwiseData.from_arrays(small.a, small.b, small.y, users=small.users,
                                       item_features=np.zeros((small.n_items, 0)))
    with pytest.raises(DataError, match="lengthscale_prior"):
        cz.fit(cz.CollabGP(n_latent=1, lengthscale_prior=PRIOR), bare, method="nuts", num_samples=1,
               warmup_steps=1)
    with pytest.raises(DataError, match="learn_kernel"):
        cz.fit(cz.CollabGP(n_latent=1, lengthscale_prior=PRIOR), small, method="svi", learn_kernel=True,
               num_steps=1)
    with pytest.raises(DataError, match="user_lengthscale_prior"):
        cz.CollabGP(user_lengthscale_prior=dist.Normal(0.0, 1.0))
    model = cz.CollabGP(n_latent=1)
    setup = model.setup(small)
    assert model.program(setup, small)[0] is collabgp_model
    fn, args = dataclasses.replace(model, lengthscale_prior=PRIOR).program(setup, small)
    assert fn is collabgp_lengthscale_model
    assert args[0].prior.event_shape == (2,) and args[0].users is None
