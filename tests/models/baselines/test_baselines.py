"""Baselines of the crowdGPPL paper: GPPL-per-user (batched over users) and the §5.1 matching."""
import numpy as np
import pytest

import crowdzoo as cz
from crowdzoo.comparisons.simulation import match_components


@pytest.fixture(scope="module")
def crowd():
    data, truth = cz.simulate_crowd(n_items=30, n_users=8, n_pairs=640, n_components=2, seed=4)
    return data, cz.fit(cz.GPPLPerUser(n_inducing=15), data, forgetting_rate=0.5, tol=1e-8,
                        max_iter=2000, progress_bar=False)


def test_per_user_equals_one_gppl_per_user(crowd):
    """The batched fit of every user agrees with a separate GPPL fitted to that user alone."""
    data, post = crowd
    for u in (0, 5):
        mine = data.subset(data.users == u)
        alone = cz.PairwiseData.from_arrays(mine.a, mine.b, mine.y, mine.item_features)
        ref = cz.fit(cz.GPPL(n_inducing=15, item_residual=False), alone, method="natgrad", likelihood="exact",
                     learn_kernel=False,
                     batch_size=10**6, forgetting_rate=0.5, max_iter=2000, tol=1e-8, eval_every=1,
                     progress_bar=False)
        a, b = np.arange(0, 29), np.arange(1, 30)
        p_ref = ref.predict_proba(a, b)
        p = post.predict_proba(data.item_ids[a], data.item_ids[b], users=[data.user_ids[u]] * len(a))
        assert np.abs(p - p_ref).max() < 0.02


def test_per_user_consensus_is_mean_of_users(crowd):
    data, post = crowd
    consensus, _ = post.utilities()
    personal, _ = post.utilities(users=data.user_ids)
    np.testing.assert_allclose(consensus.to_numpy(), personal.to_numpy().mean(1), atol=1e-10)
    p = post.predict_proba(data.item_ids[data.a[:50]], data.item_ids[data.b[:50]])
    q = post.predict_proba(data.item_ids[data.b[:50]], data.item_ids[data.a[:50]])
    np.testing.assert_allclose(p + q, 1.0, atol=1e-12)


def test_per_user_errors(crowd):
    data, post = crowd
    single = cz.PairwiseData.from_arrays(data.a, data.b, data.y, data.item_features)
    with pytest.raises(cz.DataError, match="users"):
        cz.fit(cz.GPPLPerUser(), single)
    with pytest.raises(cz.DataError, match="natgrad"):
        cz.fit(cz.GPPLPerUser(), data, method="svi")
    with pytest.raises(cz.DataError, match="user id 99"):
        post.predict_proba([0], [1], users=[99])


def test_component_matching_is_invariant_to_order_and_sign():
    rng = np.random.default_rng(0)
    V = rng.standard_normal((3, 40))
    assert match_components(V, -V[[2, 0, 1]]) == pytest.approx(1.0)
    assert match_components(V, np.vstack([V[[1]], rng.standard_normal((4, 40))])) < 0.8


def test_per_user_to_arviz_draws_match_the_posterior_moments(tmp_path, monkeypatch):
    """The ArviZ draws of each user's f reproduce utilities(users=...) (Monte Carlo against the
    closed form), each label's log-likelihood is its own user's, and the report runs on it."""
    data, _ = cz.simulate_crowd(n_items=20, n_users=5, n_pairs=300, n_components=2, seed=1)
    post = cz.fit(cz.GPPLPerUser(n_inducing=12), data, progress_bar=False)
    dt = post.to_arviz(n_draws=4000, seed=3)
    f = dt.posterior["f"]
    assert f.dims == ("chain", "draw", "user", "item") and list(f["user"].values) == list(data.user_ids)
    mean, var = post.utilities(users=data.user_ids)
    draws = f.values.reshape(-1, data.n_users, data.n_items)
    se = np.sqrt(var.to_numpy().T / draws.shape[0])
    assert np.abs(draws.mean(0) - mean.to_numpy().T).max() < 5 * se.max()
    # q(s_j) is sampled where utilities() uses E[s_j] in the sparse conditional: close, not equal
    np.testing.assert_allclose(draws.var(0), var.to_numpy().T, rtol=0.15)
    i = 7
    u, a, b = data.users[i], data.a[i], data.b[i]
    z = (draws[:, u, a] - draws[:, u, b]) * (2 * data.y[i] - 1)
    from scipy.stats import norm
    np.testing.assert_allclose(dt.log_likelihood["y"].values.reshape(-1, data.n_pairs)[:, i], norm.logcdf(z))
    # past the size limit f is left out; the labels' log-likelihood is the same draws
    import crowdzoo.models.baselines.gppl_per_user as cza
    monkeypatch.setattr(cza, "_MAX_NUMBERS", 0)
    small = post.to_arviz(n_draws=4000, seed=3)
    assert "f" not in small.posterior and "f_omitted" in small.attrs
    np.testing.assert_array_equal(small.log_likelihood["y"].values, dt.log_likelihood["y"].values)
    rep = cz.report(post, tmp_path / "per_user.html")
    names = [c.name for c in rep.checks]
    assert "PPC: user first-item rates" in names and any("f_mean" in k for k in rep.figures)
