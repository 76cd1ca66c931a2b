"""BayesSCDC: the conjugate global updates against scikit-learn's variational GMM, the NIW KL
against Monte Carlo, the message passing's fixed point (Eq. 12, 14) against autograd, the Beta
posteriors against the closed-form counts, and the route on simulated data (pinwheel clusters,
workers' reliabilities, clusters switched off)."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import crowdzoo as cz
from crowdzoo.cluster_metrics import hungarian_accuracy
from crowdzoo.data.links import same_cluster_counts
from crowdzoo.errors import DataError
from crowdzoo.models.scdc.bayes import (
    Conjugate,
    Stats,
    conjugate_update,
    expected,
    expected_loglik,
    item_stats,
    kl_niw,
    local_step,
    moments,
    natgrad_step,
    relational_weights,
    worker_stats,
)

F64 = torch.float64


def test_global_updates_agree_with_scikit_learns_variational_gmm():
    """With the recognition potential an identity observation (h = λo, λ = 10⁷, so q(x_n) ≈ δ(o_n)),
    no annotations, the whole data as one batch and ρ = 1, BayesSCDC's local step and natural-gradient
    step are coordinate-ascent VI of a Bayesian GMM: from the same k-means start, the fixed point equals
    BayesianGaussianMixture's with the same priors (Dirichlet 1.05, NIW κ₀ = 0.5, ν₀ = S₀ = d + ½)."""
    from scipy.optimize import linear_sum_assignment
    from sklearn.cluster import KMeans
    from sklearn.mixture import BayesianGaussianMixture

    rng = np.random.default_rng(0)
    d, K = 2, 3
    X = np.concatenate([rng.normal(c, s, size=(n, d))
                        for c, s, n in [((0, 0), 0.5, 60), ((4, 1), 0.8, 40), ((-3, 4), 0.6, 50)]])
    bgm = BayesianGaussianMixture(
        n_components=K, covariance_type="full", weight_concentration_prior_type="dirichlet_distribution",
        weight_concentration_prior=1.05, mean_precision_prior=0.5, mean_prior=np.zeros(d),
        degrees_of_freedom_prior=d + 0.5, covariance_prior=(d + 0.5) * np.eye(d), reg_covar=0.0, tol=1e-12,
        max_iter=2000, random_state=0).fit(X)
    prior = cz.BayesSCDC(n_clusters=K, latent_dim=d).prior(1)
    O = torch.as_tensor(X, dtype=F64)
    h, lam = 1e7 * O, torch.full_like(O, 1e7)
    none = torch.zeros(1, 2, dtype=F64)
    start = torch.as_tensor(KMeans(K, n_init=1, random_state=0).fit(X).labels_).long()
    phi = torch.nn.functional.one_hot(start, K).double()
    q = conjugate_update(prior, Stats(*moments(phi, O, torch.zeros(O.shape[0], d, d, dtype=F64)), none, none))
    for _ in range(300):
        loc = local_step(expected(q), h, lam, sweeps=1)
        target = conjugate_update(prior, Stats(*item_stats(loc, slice(None), 1.0), none, none))
        q = natgrad_step(q, target, 1.0)
    _, c = linear_sum_assignment(np.linalg.norm(bgm.means_[:, None] - q.m.numpy()[None], axis=-1))
    print(f"Dirichlet a: sklearn {np.round(bgm.weight_concentration_, 6)}, "
          f"ours {np.round(q.a.numpy()[c], 6)}")
    np.testing.assert_allclose(q.a.numpy()[c], bgm.weight_concentration_, rtol=1e-6)
    np.testing.assert_allclose(q.kappa.numpy()[c], bgm.mean_precision_, rtol=1e-6)
    np.testing.assert_allclose(q.nu.numpy()[c], bgm.degrees_of_freedom_, rtol=1e-6)
    np.testing.assert_allclose(q.m.numpy()[c], bgm.means_, atol=1e-6)
    np.testing.assert_allclose(q.S.numpy()[c], bgm.covariances_ * bgm.degrees_of_freedom_[:, None, None],
                               rtol=1e-5)


def _random_niw(K, d, g):
    A = torch.randn(K, d, d, generator=g, dtype=F64)
    return (torch.rand(K, generator=g, dtype=F64) + 0.5, torch.randn(K, d, generator=g, dtype=F64),
            A @ A.transpose(-1, -2) + d * torch.eye(d, dtype=F64),
            d + 2 * torch.rand(K, generator=g, dtype=F64))


def test_niw_kl_matches_monte_carlo():
    """KL(NIW_q ‖ NIW_p) in closed form against the mean of log q − log p over 40,000 draws of (μ, Λ)
    from q (torch's Wishart and Normal): within 4 standard errors, for three clusters."""
    g = torch.Generator().manual_seed(0)
    K, d, n = 3, 3, 40000
    kq, mq, Sq, nq = _random_niw(K, d, g)
    kp, mp, Sp, np_ = _random_niw(K, d, g)
    z = torch.zeros(K, dtype=F64)
    q = Conjugate(z, kq, mq, Sq, nq, z, z)
    p = Conjugate(z, kp, mp, Sp, np_, z, z)
    kl = kl_niw(q, p)
    D = torch.distributions
    torch.manual_seed(0)
    for k in range(K):
        wq = D.Wishart(nq[k], covariance_matrix=torch.linalg.inv(Sq[k]))
        wp = D.Wishart(np_[k], covariance_matrix=torch.linalg.inv(Sp[k]))
        Lam = wq.sample((n,))
        gq = D.MultivariateNormal(mq[k], precision_matrix=kq[k] * Lam)
        gp = D.MultivariateNormal(mp[k], precision_matrix=kp[k] * Lam)
        mu = gq.sample()
        log_ratio = wq.log_prob(Lam) + gq.log_prob(mu) - wp.log_prob(Lam) - gp.log_prob(mu)
        mc, se = float(log_ratio.mean()), float(log_ratio.std() / math.sqrt(n))
        print(f"cluster {k}: KL closed form {float(kl[k]):.4f}, Monte Carlo {mc:.4f} ± {se:.4f}")
        assert abs(float(kl[k]) - mc) < 4 * se


def _surrogate(E, h, lam, x, V, logits, li, lj, w, same, diff):
    """The local part of the surrogate objective L̂ (Eq. 10) at q(z) = softmax(logits), q(x) = N(x, V)."""
    log_phi = torch.log_softmax(logits, -1)
    phi = log_phi.exp()
    ell = expected_loglik(E, x, V)
    psi = (h * x).sum(-1) - 0.5 * (lam * (torch.diagonal(V, dim1=-2, dim2=-1) + x ** 2)).sum(-1)
    ent_x = 0.5 * torch.logdet(2 * math.pi * math.e * V)
    s = (phi[li] * phi[lj]).sum(-1)
    return ((phi * (E.log_pi + ell - log_phi)).sum() + (psi + ent_x).sum()
            + (s * same + (1 - s) * diff).sum())


def test_message_passing_reaches_a_stationary_point_of_the_surrogate():
    """After enough sweeps of Eq. 12 and 14 (with annotations' messages), the surrogate L̂ is stationary
    in q(x_n)'s mean and covariance and in q(z_n): autograd's gradients vanish (within 1e-6), and no
    small random perturbation of q(z) raises L̂."""
    g = torch.Generator().manual_seed(1)
    K, d, n, W = 4, 2, 30, 3
    model = cz.BayesSCDC(n_clusters=K, latent_dim=d)
    prior = model.prior(W)
    q = prior._replace(a=prior.a + 5 * torch.rand(K, generator=g, dtype=F64),
                       kappa=prior.kappa + 10, m=3 * torch.randn(K, d, generator=g, dtype=F64),
                       nu=prior.nu + 10, S=prior.S * 10,
                       alpha=torch.tensor([[8.0, 2.0], [6.0, 3.0], [9.0, 1.0]], dtype=F64),
                       beta=torch.tensor([[7.0, 2.0], [9.0, 2.0], [5.0, 3.0]], dtype=F64))
    E = expected(q)
    h = 2 * torch.randn(n, d, generator=g, dtype=F64)
    lam = 0.5 + torch.rand(n, d, generator=g, dtype=F64)
    li = torch.randint(n, (20,), generator=g)
    lj = (li + 1 + torch.randint(n - 1, (20,), generator=g)) % n
    w_ann = torch.randint(W, (20,), generator=g)
    L = torch.randint(2, (20,), generator=g).to(F64)
    w, same, diff = relational_weights(E, w_ann, L)
    loc = local_step(E, h, lam, li, lj, w, sweeps=200)
    x = loc.x.clone().requires_grad_()
    V = torch.cholesky_inverse(loc.P_chol).clone().requires_grad_()
    log_phi = loc.log_phi.clone().requires_grad_()
    f = _surrogate(E, h, lam, x, V, log_phi, li, lj, w_ann, same, diff)
    gx, gV, gphi = torch.autograd.grad(f, (x, V, log_phi))
    print(f"max |∂L̂/∂x| {gx.abs().max():.2e}, |∂L̂/∂V| {gV.abs().max():.2e}, "
          f"|∂L̂/∂log φ| {gphi.abs().max():.2e}")
    assert gx.abs().max() < 1e-6 and gV.abs().max() < 1e-6 and gphi.abs().max() < 1e-6
    with torch.no_grad():
        for _ in range(20):
            bumped = torch.log_softmax(loc.log_phi + 0.05 * torch.randn(n, K, generator=g, dtype=F64), -1)
            assert _surrogate(E, h, lam, x, V, bumped, li, lj, w_ann, same, diff) <= f + 1e-9
    # a wrong message sign breaks stationarity
    bad = local_step(E, h, lam, li, lj, -w, sweeps=200)
    log_phi = bad.log_phi.clone().requires_grad_()
    f = _surrogate(E, h, lam, bad.x, torch.cholesky_inverse(bad.P_chol), log_phi, li, lj, w_ann, same, diff)
    assert torch.autograd.grad(f, log_phi)[0].abs().max() > 1e-3


def test_beta_posteriors_with_known_clusters_are_the_prior_plus_the_counts():
    """With every item's cluster known (one-hot q(z)), the Beta posteriors of α_m and β_m are the prior
    plus the closed-form counts of ``same_cluster_counts`` (must-links among same-cluster pairs, …)."""
    data, truth = cz.simulate_links(n_arms=3, n_per_arm=20, n_annotated=40, n_workers=4, window=20, seed=2)
    z = truth["labels"]
    phi = torch.nn.functional.one_hot(torch.as_tensor(z).long(), 3).double()
    s = (phi[data.i] * phi[data.j]).sum(-1)
    L = torch.as_tensor(data.same, dtype=F64)
    a, b = worker_stats(s, torch.as_tensor(data.worker).long(), L, data.n_workers, 1.0)
    prior = cz.BayesSCDC(n_clusters=3, latent_dim=2).prior(data.n_workers)
    none = torch.zeros(3, dtype=F64)
    post = conjugate_update(prior, Stats(none, torch.zeros(3, 2, dtype=F64), torch.zeros(3, 2, 2, dtype=F64),
                                         a, b))
    c = same_cluster_counts(data, z)
    np.testing.assert_allclose(post.alpha[:, 0].numpy(), 1 + c["n_same_ml"])
    np.testing.assert_allclose(post.alpha[:, 1].numpy(), 1 + c["n_same"] - c["n_same_ml"])
    np.testing.assert_allclose(post.beta[:, 0].numpy(), 1 + c["n_diff_cl"])
    np.testing.assert_allclose(post.beta[:, 1].numpy(), 1 + c["n_diff"] - c["n_diff_cl"])


@pytest.fixture(scope="module")
def pinwheel():
    data, truth = cz.simulate_links(seed=0)
    post = cz.fit(cz.BayesSCDC(n_clusters=15, latent_dim=2, hidden=(64, 64)), data, n_epochs=400,
                  pretrain=0, progress_bar=False, seed=0, n_init=1)
    return data, truth, post


def test_pinwheel_is_clustered_and_spare_clusters_are_switched_off(pinwheel):
    """The paper's pinwheel (500 points, 100 annotated, 20 workers × 49 pairs, α = β = 0.9), initial
    K = 15, small networks (fast mode): Hungarian accuracy ≥ 0.9 (paper: 96.6 %), fewer than 15 clusters
    in use, and every cluster that is no item's most probable one holds less than one item's mass
    under q(π) (a_k − a₀ < 1)."""
    data, truth, post = pinwheel
    acc = hungarian_accuracy(truth["labels"], post.predict().to_numpy())
    used = post.clusters_in_use()
    off = np.setdiff1d(np.arange(15), used.index.to_numpy())
    wk = post.workers()
    spare = post.conjugate["a"][off].numpy() - 1.05
    print(f"pinwheel accuracy {acc:.3f}, clusters in use {len(used)} of 15, the others' expected counts "
          f"≤ {spare.max():.2f}; mean |α̂ − 0.9| {np.abs(wk['alpha'] - 0.9).mean():.3f}, "
          f"mean |β̂ − 0.9| {np.abs(wk['beta'] - 0.9).mean():.3f}")
    assert acc >= 0.9
    assert len(used) < 15 and spare.max() < 1.0
    assert (wk["alpha_lo"] < wk["alpha"]).all() and (wk["alpha"] < wk["alpha_hi"]).all()
    assert np.abs(wk["beta"] - 0.9).mean() < 0.1


def test_workers_reliabilities_recovered_with_clusters_unknown(blob_links):
    """Three separated blobs, 5 MCVC workers × 2000 pairs: q(α_m), q(β_m)'s means within 0.05 of the
    simulated truth, and the truth inside the 99 % intervals for most workers."""
    data, alpha, beta = blob_links
    labels = data.labels
    post = cz.fit(cz.BayesSCDC(n_clusters=6, latent_dim=2, hidden=(32, 32)), data, n_epochs=150,
                  batch_size=50, pretrain=0, progress_bar=False, seed=0, n_init=1)
    acc = hungarian_accuracy(labels, post.predict().to_numpy())
    wk = post.workers(level=0.99)
    print(f"accuracy {acc:.3f}; |α̂ − α| max {np.abs(wk['alpha'] - alpha).max():.3f}, "
          f"|β̂ − β| max {np.abs(wk['beta'] - beta).max():.3f}")
    assert acc > 0.97
    assert np.abs(wk["alpha"].to_numpy() - alpha).max() < 0.05
    assert np.abs(wk["beta"].to_numpy() - beta).max() < 0.05
    inside = ((wk["alpha_lo"] <= alpha) & (alpha <= wk["alpha_hi"])).sum()
    assert inside >= 4


def test_pretraining_alone_finds_the_blobs_and_slows_the_global_steps(blob_links):
    """VaDE-style pretraining (``pretrain=``: a VAE, then a Gaussian mixture on the latent points as the
    conjugate posterior) clusters three separated blobs without annotations after a single epoch, and
    selects no warm-up and the slower step schedule ρ_t = (t + 100)^−1."""
    data = blob_links[0].without_annotations()
    post = cz.fit(cz.BayesSCDC(n_clusters=3, latent_dim=2, hidden=(32, 32)), data, pretrain=100,
                  n_epochs=1, batch_size=50, progress_bar=False, seed=0, n_init=1)
    acc = hungarian_accuracy(data.labels, post.predict().to_numpy())
    print(f"blobs after pretraining and one epoch: accuracy {acc:.3f}")
    assert acc > 0.97
    st = post.settings
    assert (st["pretrain"], st["warmup"], st["step_delay"], st["forgetting_rate"]) == (100, 0, 100.0, 1.0)


def test_posterior_api_new_items_save_load_and_report(pinwheel, tmp_path):
    """The zoo's default route for "bayesscdc" is natgrad; items without annotations get the same q(z)
    from cluster_proba(O) (the encoder and the globals, no annotations) as from the fit, annotated
    items' differ (their messages); save/load keeps everything; ArviZ and the report work."""
    data, truth, post = pinwheel
    assert cz.zoo.entry("bayesscdc").default == "natgrad" and post.method == "natgrad"
    annotated = np.zeros(data.n_items, bool)
    annotated[data.i] = annotated[data.j] = True
    fresh = post.cluster_proba(data.O).to_numpy()
    fitted = post.cluster_proba().to_numpy()
    np.testing.assert_allclose(fresh[~annotated], fitted[~annotated], atol=1e-6)
    assert np.abs(fresh[annotated] - fitted[annotated]).max() > 1e-3
    post.save(tmp_path / "b.pt")
    back = cz.load(tmp_path / "b.pt")
    np.testing.assert_allclose(back.cluster_proba(data.O).to_numpy(), fresh)
    assert back.alpha_post.shape == (data.n_workers, 2) and back.conjugate["S"].shape == (15, 2, 2)
    tree = post.to_arviz(n_draws=50)
    assert tree["posterior"]["alpha"].shape == (1, 50, data.n_workers)
    rep = cz.report(post, tmp_path / "report.html")
    assert rep.path.exists() and any(c.name.startswith("PPC: worker must-link") for c in rep.checks)


def test_bad_settings_are_refused_naming_the_argument():
    data, _ = cz.simulate_links(n_arms=3, n_per_arm=8, n_annotated=12, n_workers=2, window=8, seed=1)
    for kw, name in ((dict(niw_dof=0.5), "niw_dof"), (dict(dirichlet=0.0), "dirichlet"),
                     (dict(worker_prior=(1.0, -1.0)), "worker_prior"), (dict(sweeps=0), "sweeps")):
        with pytest.raises(DataError, match=name):
            cz.BayesSCDC(latent_dim=2, **kw)
    model = cz.BayesSCDC(n_clusters=3, latent_dim=2, hidden=(4,))
    for kw, name in ((dict(warmup=5, n_epochs=5), "warmup"), (dict(forgetting_rate=0.4), "forgetting_rate"),
                     (dict(step_delay=0.0), "step_delay"), (dict(pretrain=-1), "pretrain")):
        with pytest.raises(DataError, match=name):
            cz.fit(model, data, progress_bar=False, **kw)


def test_messages_in_chunks_equal_one_pass_and_a_dense_sum():
    """Eq. 14's relational term, summed in chunks of annotations (to bound memory on large graphs),
    equals the dense sum W φ with W the symmetric matrix of the annotations' weights."""
    from crowdzoo.models.scdc.bayes import messages

    g = torch.Generator().manual_seed(0)
    phi = torch.rand(50, 4, generator=g, dtype=F64)
    li, lj = torch.randint(50, (300,), generator=g), torch.randint(50, (300,), generator=g)
    w = torch.randn(300, generator=g, dtype=F64)
    Wd = torch.zeros(50, 50, dtype=F64).index_put((li, lj), w, accumulate=True)
    dense = (Wd + Wd.T) @ phi
    torch.testing.assert_close(messages(phi, li, lj, w), dense)
    torch.testing.assert_close(messages(phi, li, lj, w, chunk=7), dense)


def test_overlapping_low_dimensional_groups_keep_every_cluster():
    """Three unit Gaussian groups in 4-D whose means lie 2 sd apart (k-means: 73 % accuracy): with the
    Gaussian decoder's noise capped at a fraction of the features' sd, every cluster keeps its share of
    the items and the fit is far above the one-cluster answer (about 40 %). With the noise uncapped
    (``obs_noise=None``), the decoder explains the features as noise, the recognition potentials go
    flat and the mixture ends with one cluster holding over 85 % of the items."""
    from crowdzoo.comparisons.scdc_crowd import overlapping_groups

    O, y = overlapping_groups(300, np.random.default_rng(0))
    data = cz.LinkData.from_arrays(np.zeros(0, int), np.zeros(0, int), np.zeros(0), O, labels=y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = cz.fit(cz.BayesSCDC(n_clusters=3), data, seed=0, n_init=1, pretrain=100, n_epochs=50,
                      clusters="gibbs", progress_bar=False)
    pred = post.predict().to_numpy()
    assert post.settings["clusters_from"] == "vi"  # without links the chain put every item in one cluster
    assert np.bincount(pred, minlength=3).min() >= 0.15 * len(y)
    assert hungarian_accuracy(y, pred) >= 0.6


def test_gibbs_clusters_follow_the_links_where_the_features_are_ambiguous():
    """scdc-crowd's overlapping set, small (120 items in three 4-D groups whose means lie 2 sd apart,
    20 two-coin workers × 40 links), from the features' start (``start="features"``: pretraining's
    Gaussian mixture as it is): on seeds 0 and 2 the variational fixed point puts 0.84 and 0.86 of
    the items in their groups, the end-of-fit Gibbs sampler's clusters — the posterior's
    ``cluster_probs`` under ``clusters="gibbs"`` — follow the links (0.94 and 0.95): the links move
    the sampled mixture (with the default links-aware start the fixed point itself reaches 0.94 on
    both seeds, the chain 0.95). The mixture refit to the chain labels new items as the training items are
    labelled: ``predict(O)`` on the training features (no links) agrees with ``predict()`` best with
    no relabelling. The default, ``clusters="vi"``, returns from the same fit the fixed point's
    clusters and the same workers (one chain)."""
    from scipy.optimize import linear_sum_assignment

    from crowdzoo.comparisons.scdc_crowd import link_set

    for seed in (0, 2):
        data, K, _, _ = link_set("overlapping", seed, quick=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = cz.fit(cz.BayesSCDC(n_clusters=K), data, seed=seed, n_init=1, clusters="gibbs",
                          start="features", progress_bar=False)
        y, z = data.labels, post.predict().to_numpy()
        gibbs = hungarian_accuracy(y, z)
        assert gibbs >= 0.9
        vi = hungarian_accuracy(y, post.vi_cluster_probs.argmax(1).numpy())
        new = post.predict(data.O).to_numpy()
        C = np.zeros((K, K), int)
        np.add.at(C, (z, new), 1)
        r, c = linear_sum_assignment(-C)
        print(f"seed {seed}: Gibbs clusters {gibbs:.3f}, VI {vi:.3f}; predict(O) = predict() on "
              f"{(new == z).mean():.3f} of the items (best relabelling {C[r, c].sum() / z.size:.3f})")
        assert gibbs >= vi + 0.05
        assert (new == z).mean() >= 0.6 and (new == z).sum() == C[r, c].sum()
        assert post.settings["clusters"] == "gibbs" and post.settings["clusters_from"] == "gibbs"
        torch.testing.assert_close(post.cluster_probs.sum(1), torch.ones(data.n_items, dtype=F64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fixed = cz.fit(cz.BayesSCDC(n_clusters=K), data, seed=seed, n_init=1, start="features",
                       progress_bar=False)
    assert torch.equal(fixed.cluster_probs, post.vi_cluster_probs)
    assert torch.equal(fixed.alpha_post, post.alpha_post) and torch.equal(fixed.beta_post, post.beta_post)
    with pytest.raises(DataError, match="clusters"):
        cz.fit(cz.BayesSCDC(n_clusters=K), data, clusters="chain", progress_bar=False)
