"""Learning crowdGPPL's kernel: the natgrad route learns the item and user kernels' length-scales (ARD) with
the hybrid of GPPL's natgrad (Adam on log ℓ between natural-gradient sweeps, q whitened). The fit in
the whitened basis equals the plain fit when ℓ is frozen; a known ARD truth is recovered and the held-out
labels are predicted better than with the median heuristic; checkpoints resume bit for bit."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import norm

import crowdzoo as cz
from crowdzoo.errors import DataError


def _ard_crowd(seed=0, N=40, U=15, P=1500):
    """Consensus sin(1.5 x₀) and two components of x₀ alone; x₁ is irrelevant. Independent users."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (N, 2))
    t = np.sin(1.5 * X[:, 0])
    V = np.stack([np.cos(1.5 * X[:, 0]), X[:, 0] ** 2 / 2 - 1])
    F = t[:, None] + V.T @ rng.normal(0, 1, (2, U))
    a = rng.integers(N, size=P)
    b = (a + 1 + rng.integers(N - 1, size=P)) % N
    j = rng.integers(U, size=P)
    y = (rng.random(P) < norm.cdf(F[a, j] - F[b, j])).astype(float)
    return X, a, b, j, y


def test_crowd_learns_an_ard_kernel_and_predicts_better():
    X, a, b, j, y = _ard_crowd()
    data = cz.PairwiseData.from_arrays(a[:1000], b[:1000], y[:1000], item_features=X, users=j[:1000])
    model = cz.CrowdGPPL(n_components=5, n_inducing=None)
    cee = {}
    for learn in (False, True):
        post = cz.fit(model, data, method="natgrad", likelihood="exact", learn_kernel=learn,
                      progress_bar=False)
        p = post.predict_proba(a[1000:], b[1000:], users=j[1000:])
        yt = y[1000:]
        cee[learn] = -np.mean(yt * np.log(p) + (1 - yt) * np.log1p(-p))
        print(f"learn_kernel={learn}: held-out CEE {cee[learn]:.4f}, accuracy {np.mean((p > .5) == yt):.3f}, "
              f"{post.settings['iterations']} iterations, length-scales "
              f"{post.settings.get('learned_lengthscale')}")
    ell = np.array(post.settings["learned_lengthscale"])
    assert post.settings["converged"]
    assert ell[1] > 3 * ell[0]
    assert cee[True] < cee[False] - 0.02
    np.testing.assert_allclose(post.model.lengthscale.numpy(), ell)


def test_crowd_whitened_fit_equals_the_plain_fit_when_the_kernel_is_frozen():
    """With user features (so both sides are whitened) and kernel_lr = 0, the posterior over the
    inducing values equals the f-space fit's to round-off; the user length-scales are reported."""
    data, _ = cz.simulate_crowd(n_items=20, n_users=8, n_pairs=300, n_components=2, seed=2)
    from crowdzoo.gp.kernels import median_heuristic

    model = cz.CrowdGPPL(n_components=2, n_inducing=None, n_inducing_users=None,  # both fits start here
                         lengthscale=median_heuristic(data.item_features),
                         user_lengthscale=median_heuristic(data.user_features))
    kw = dict(method="natgrad", likelihood="exact", max_iter=15, tol=0.0, rho_min=0.0, progress_bar=False)
    frozen = cz.fit(model, data, learn_kernel=True, kernel_lr=0.0, **kw)
    plain = cz.fit(model, data, **kw)
    assert frozen.settings["learned_user_lengthscale"] == frozen.settings["start_user_lengthscale"]
    for k in ("t_m", "v_m", "w_m", "t_cov", "v_cov", "w_cov"):
        torch.testing.assert_close(getattr(frozen, k), getattr(plain, k), rtol=1e-6, atol=1e-8)


def test_crowd_learning_resumes_bit_for_bit():
    X, a, b, j, y = _ard_crowd(N=20, U=6, P=300)
    data = cz.PairwiseData.from_arrays(a, b, y, item_features=X, users=j)
    model = cz.CrowdGPPL(n_components=2, n_inducing=None)
    kw = dict(method="natgrad", learn_kernel=True, max_iter=20, tol=0.0, batch_size=100, progress_bar=False)
    whole = cz.fit(model, data, **kw)
    part = cz.fit(model, data, **{**kw, "max_iter": 9})
    rest = cz.fit(model, data, resume=part, **kw)
    assert rest.settings["learned_lengthscale"] == whole.settings["learned_lengthscale"]
    torch.testing.assert_close(rest.v_m, whole.v_m, rtol=0, atol=0)


def test_crowd_learn_kernel_refuses_a_model_without_an_item_kernel():
    X, a, b, j, y = _ard_crowd(N=10, U=3, P=50)
    data = cz.PairwiseData.from_arrays(a, b, y, item_features=X, users=j)
    with pytest.raises(DataError, match="learn_kernel"):
        cz.fit(cz.CrowdGPPL(n_components=2, item_features=False), data, method="natgrad", learn_kernel=True)


def test_crowd_lengthscale_prior_pulls_the_learned_values():
    """crowdGPPL's natgrad with learn_kernel climbs bound + log p(ℓ): a tight prior at ℓ = 1 on the items
    holds the irrelevant feature's length-scale near 1, where the bound alone sends it 3× past the
    relevant one's; priors the route would ignore are refused."""
    import pyro.distributions as dist

    X, a, b, j, y = _ard_crowd(P=600)
    data = cz.PairwiseData.from_arrays(a, b, y, item_features=X, users=j)
    kw = dict(method="natgrad", likelihood="exact", learn_kernel=True, max_iter=60, progress_bar=False)
    free = np.array(cz.fit(cz.CrowdGPPL(n_components=3, n_inducing=None), data, **kw
                           ).settings["learned_lengthscale"])
    tight = np.array(cz.fit(cz.CrowdGPPL(n_components=3, n_inducing=None,
                                         lengthscale_prior=dist.LogNormal(0.0, 0.05)), data, **kw
                            ).settings["learned_lengthscale"])
    print(f"no prior {free.round(3)}, LogNormal(0, 0.05) {tight.round(3)}")
    assert free[1] > 3 * free[0] and np.all(np.abs(np.log(tight)) < 0.2)
    with pytest.raises(DataError, match="lengthscale_prior"):
        cz.fit(cz.CrowdGPPL(lengthscale_prior=dist.LogNormal(0.0, 1.0)), data, method="natgrad")


@pytest.mark.slow  # 16 s of svi; natgrad's learning of the same kernels is tested above
def test_crowd_svi_learns_the_length_scales_as_parameters():
    """svi with learn_kernel=True: the item length-scales are pyro.params of crowdGPPL's program
    (optimised by the ELBO with the mean-field guide); the irrelevant feature's ends well above the
    relevant one's, and the posterior predicts with them."""
    X, a, b, j, y = _ard_crowd(P=600)
    data = cz.PairwiseData.from_arrays(a, b, y, item_features=X, users=j)
    post = cz.fit(cz.CrowdGPPL(n_components=3, n_inducing=None), data, method="svi", learn_kernel=True,
                  num_steps=1500, lr=0.02, progress_bar=False)
    ell = np.array(post.settings["learned_lengthscale"])
    print(f"svi: median heuristic {np.round(post.settings['start_lengthscale'], 3)} → learned {ell.round(3)}")
    assert ell[1] > 3 * ell[0]
    np.testing.assert_allclose(post.setup.items.kernel.lengthscale.numpy(), ell)
    np.testing.assert_allclose(post.model.lengthscale.numpy(), ell)
    p = post.predict_proba(a[:50], b[:50], users=j[:50])
    assert np.all((p > 0) & (p < 1))


def _taste_panel():
    """150 items with 8 features, half irrelevant; 200 users with low-rank tastes, 30 labels each:
    (training data, the held-out decided (a, b, users), the simulation's truth)."""
    from crowdzoo.data.simulate_panel import Panel, simulate_panel

    panel = Panel(n_items=150, n_users=200, labels_per_user=30, features="irrelevant", n_features=8,
                  taste="low-rank", rank=2, personal=1.0, residual=0.3)
    train, test, items, _, truth = simulate_panel(panel, seed=0)
    test = test[test["tie"] == "no"]
    data = cz.PairwiseData.from_frame(train.drop(columns=["p_winner", "tie"]).assign(y=1), items,
                                      a="winner", b="loser", y="y", user="taster")
    return data, tuple(test[c].to_numpy() for c in ("winner", "loser", "taster")), truth


def test_a_sparse_item_side_learns_by_default_and_carries_personal_tastes():
    """With M < N inducing items over features that are half irrelevant, the median heuristic's
    components are too smooth for personal tastes (personal predictions equal the consensus's); the
    default learns the length-scales there and predicts each user's held-out labels near the truth.
    Where every item is inducing the default keeps the median heuristic."""
    import warnings

    from crowdzoo.models.crowdgppl.natgrad import learns

    data, (a, b, users), truth = _taste_panel()
    model = cz.CrowdGPPL(n_inducing=25, n_components=2)
    loss = {}
    for learn in (False, None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = cz.fit(model, data, progress_bar=False, learn_kernel=learn)
        loss[learn] = -np.log(post.predict_proba(a, b, users=users)).mean()
        consensus = -np.log(post.predict_proba(a, b)).mean()
        if learn is None:
            assert post.settings["learn_kernel"] is True
            assert loss[None] < consensus - 0.1  # the personal part carries the tastes
    assert loss[None] < loss[False] - 0.1
    assert loss[None] < truth["oracle"] + 0.15
    exact = cz.CrowdGPPL(n_inducing=None, n_components=2)
    assert not learns(exact, data, exact.setup(data))
    assert learns(model, data, model.setup(data))


def test_above_the_learning_size_the_length_scales_come_from_pooled_labels(monkeypatch):
    """Above LEARN_SPARSE_LABELS the default learns the item length-scales before the fit, by GPPL's
    type-II maximum likelihood on a random subset of the labels pooled over users, and fixes them:
    the personal part then carries the tastes that the median heuristic's smooth components miss. The
    length-scales are the model's and the setup's, and a resumed fit keeps them."""
    import warnings

    from crowdzoo.models.crowdgppl import natgrad

    data, (a, b, users), truth = _taste_panel()
    monkeypatch.setattr(natgrad, "LEARN_SPARSE_LABELS", 1000)  # this crowd's 4,800 labels are "many"
    monkeypatch.setattr(natgrad, "POOLED_LABELS", 3000)
    model = cz.CrowdGPPL(n_inducing=25, n_components=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        median = cz.fit(model, data, progress_bar=False, learn_kernel=False)
        post = cz.fit(model, data, progress_bar=False)
    assert post.settings["learn_kernel"] == "pooled" and post.settings["pooled_labels"] == 3000
    ell = np.asarray(post.settings["pooled_lengthscale"])
    np.testing.assert_allclose(post.model.lengthscale.numpy(), ell)
    np.testing.assert_allclose(post.setup.items.kernel.lengthscale.numpy(), ell)
    loss = {k: -np.log(p.predict_proba(a, b, users=users)).mean() for k, p in (("median", median),
                                                                               ("pooled", post))}
    consensus = -np.log(post.predict_proba(a, b)).mean()
    assert loss["pooled"] < loss["median"] - 0.1
    assert loss["pooled"] < consensus - 0.1
    assert loss["pooled"] < truth["oracle"] + 0.2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = cz.fit(model, data, progress_bar=False, resume=post, max_iter=post.settings["iterations"] + 5)
    np.testing.assert_allclose(again.model.lengthscale.numpy(), ell)
    np.testing.assert_allclose(again.setup.items.kernel.lengthscale.numpy(), ell)
    with pytest.raises(cz.DataError, match="learn_kernel"):
        cz.fit(model, data, learn_kernel="pooled", setup=post.setup)


def test_a_sparse_side_takes_the_exact_likelihood_on_mini_batches():
    """On mini-batches the linearised likelihood leaves out a sparse side's conditional variance,
    which predictions include: a sparse item side or a sparse user side (users with features, more
    than the inducing users) takes the exact likelihood, every side inducing the paper's."""
    from crowdzoo.models.crowdgppl.natgrad import default_likelihood

    rng = np.random.default_rng(0)
    N, U, P = 20, 60, 3000
    a = rng.integers(0, N, P)
    b = (a + rng.integers(1, N, P)) % N
    data = cz.PairwiseData.from_arrays(a, b, rng.integers(0, 2, P), item_features=rng.normal(size=(N, 2)),
                                       users=rng.integers(0, U, P), user_features=rng.normal(size=(U, 1)))
    every = cz.CrowdGPPL(n_inducing=None, n_inducing_users=None)
    assert default_likelihood(False, 1000, data, every.setup(data)) == "linearised"
    for sparse in (dict(n_inducing=10, n_inducing_users=None), dict(n_inducing=None, n_inducing_users=10)):
        model = cz.CrowdGPPL(**sparse)
        assert default_likelihood(False, 1000, data, model.setup(data)) == "exact", sparse
    assert default_likelihood(False, P, data, every.setup(data)) == "exact"  # one batch: every label


def test_crowd_learning_starts_where_the_median_pair_is_at_distance_one():
    """Learned from the median heuristic in many dimensions (the median pair beyond r = 4 under it),
    each side's length-scales start at the heuristic times the median distance between two items
    (users) under it, so that the median pair (over every pair, computed here) is at r = 1; a user-set
    length-scale is the start itself."""
    data, _ = cz.simulate_crowd(n_items=30, n_users=12, n_pairs=200, n_components=2, n_features=24,
                                n_user_features=20, seed=3)
    kw = dict(method="natgrad", learn_kernel=True, max_iter=2, tol=0.0, progress_bar=False)
    post = cz.fit(cz.CrowdGPPL(n_components=2, n_inducing=10, n_inducing_users=6), data, **kw)
    for X, key in ((data.item_features, "start_lengthscale"), (data.user_features, "start_user_lengthscale")):
        X = np.asarray(X)
        i, k = np.triu_indices(X.shape[0], 1)
        r = np.sqrt((((X[i] - X[k]) / np.array(post.settings[key])) ** 2).sum(-1))
        print(f"{key}: median r {np.median(r):.3f}")
        assert abs(np.median(r) - 1.0) < 0.05
    ell = torch.full((24,), 0.7, dtype=torch.float64)
    given = cz.fit(cz.CrowdGPPL(n_components=2, n_inducing=10, n_inducing_users=6, lengthscale=ell), data,
                   **kw)
    np.testing.assert_allclose(given.settings["start_lengthscale"], ell.numpy())
