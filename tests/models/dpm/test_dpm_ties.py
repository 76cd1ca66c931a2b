"""The DPM community model with ties as a third outcome: the program's log density (svi, nuts) against a
direct computation of the summed-out likelihood (without ties and with them), τ and the communities
recovered from a simulated crowd whose ties come from the ordered probit, three-outcome predictions;
the Gibbs route's membership score against the closed-form predictive, its τ chain against the EP
posterior of τ on a grid, and its held-out three-way log loss against svi's."""
from __future__ import annotations

import warnings

import numpy as np
import pyro
import pyro.poutine as poutine
import pytest
import torch
from scipy.special import logsumexp
from scipy.stats import norm

import crowdzoo as cz
from crowdzoo.gp.ordinal import predictive_outcomes, sample_outcomes
from crowdzoo.inference.ep import ep_fixed_s
from crowdzoo.models.dpm.gibbs import _Joint, _Marginal
from crowdzoo.models.dpm.model import stick_weights, tie_scale, user_loglik

TAU = 0.6


def _crowd(tau=TAU, n_users=10, per_user=40, n_items=12, seed=0, one_community=False):
    """Two communities of users (even and odd ids) with opposite utilities ±1.5 x over one feature
    (``one_community``: every user the first); each label drawn from the ordered probit at threshold
    ``tau`` (0: no ties)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 3, size=(n_items, 1))
    f = np.stack([1.5 * X[:, 0], -1.5 * X[:, 0]])
    c = np.zeros(n_users, dtype=np.int64) if one_community else np.arange(n_users) % 2
    u = np.repeat(np.arange(n_users), per_user)
    a = rng.integers(0, n_items, u.size)
    b = (a + rng.integers(1, n_items, u.size)) % n_items
    delta = torch.as_tensor(f[c[u], a] - f[c[u], b])
    y = sample_outcomes(delta, tau, "probit", torch.Generator().manual_seed(seed)).numpy()
    return cz.PairwiseData.from_arrays(a, b, y, X, users=u, ties="model" if tau > 0 else "error"), c


def _reference_loglik(model, setup, data, u, beta, tau):
    """Σ_u log Σ_c π_c Π_p P(y_p | u_c), straight from the story with scipy's Φ: z_p = (f_a − f_b)/α
    and thresholds ±τ (a number, or one per user), the sparse conditional variance folded into both."""
    tau = np.asarray(tau)[data.users] if np.ndim(tau) else tau
    d, c = (x.numpy() for x in setup.gp.pair_terms(torch.as_tensor(data.a), torch.as_tensor(data.b)))
    s, alpha = setup.s, setup.alpha
    sd = np.sqrt(alpha ** 2 + c / s)
    z = (d @ u.T) / np.sqrt(s) / sd[:, None]  # (P, T)
    t = (tau * alpha / sd)[:, None]
    p = np.where(data.y[:, None] == 1, norm.cdf(z - t),
                 np.where(data.y[:, None] == 0, norm.cdf(-z - t), norm.cdf(t - z) - norm.cdf(-t - z)))
    log_pi = stick_weights(torch.as_tensor(beta)).numpy()
    ll = np.zeros((data.n_users, u.shape[0]))
    np.add.at(ll, data.users, np.log(p))
    return logsumexp(log_pi + ll, axis=1).sum()


def _labels_factor(model, data, sites):
    """The program's "labels" factor (the summed-out likelihood) at fixed sites."""
    setup = model.setup(data)
    fn, args = model.program(setup, data)
    tr = poutine.trace(poutine.condition(fn, data=sites)).get_trace(*args)
    return setup, tr, float(tr.nodes["labels"]["fn"].log_prob(tr.nodes["labels"]["value"]).sum())


@pytest.mark.parametrize("n_inducing, tie_threshold", [(None, "crowd"), (6, "crowd"), (6, "per_user")])
def test_log_density_matches_the_story_without_and_with_ties(n_inducing, tie_threshold):
    model = cz.DPMCommunities(truncation=3, lengthscale=[1.5], n_inducing=n_inducing, probit_scale=0.7,
                              tie_threshold=tie_threshold)
    per_user = tie_threshold == "per_user"
    g = torch.Generator().manual_seed(1)
    for tau in (0.0, TAU):
        data, _ = _crowd(tau=tau, n_users=6, per_user=10)
        M = model.setup(data).M
        sites = {"u": torch.randn(3, M, dtype=torch.float64, generator=g),
                 "beta": torch.rand(2, dtype=torch.float64, generator=g) * 0.8 + 0.1}
        tau_u = np.linspace(0.2, 1.2, data.n_users) if per_user else 0.45
        if tau:
            sites["tau"] = torch.as_tensor(tau_u, dtype=torch.float64)
        setup, tr, got = _labels_factor(model, data, sites)
        assert ("tau" in tr.nodes) == bool(tau)  # no τ site without ties: the program as before
        want = _reference_loglik(model, setup, data, sites["u"].numpy(), sites["beta"].numpy(),
                                 tau_u if tau else 0.0)
        assert abs(got - want) < 1e-10 * max(1.0, abs(want)), (tau, got, want)


def test_ordinal_user_loglik_at_zero_threshold_is_the_pairwise_probit():
    data, _ = _crowd(tau=0.0, n_users=4, per_user=8)
    model = cz.DPMCommunities(truncation=3, lengthscale=[1.5])
    G, sgn, lab, mask = model.program(model.setup(data), data)[1][:4]
    u = torch.randn(3, G.shape[1], dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    old = user_loglik(G, sgn, lab, mask, u)
    new = user_loglik(G, sgn, lab, mask, u, torch.zeros(G.shape[0], dtype=torch.float64))
    assert torch.allclose(new, old, rtol=0, atol=1e-10)


def test_svi_recovers_the_tie_threshold_and_the_communities():
    data, comm = _crowd()
    assert 0.1 < np.mean(data.y == 0.5) < 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cz.ConvergenceWarning)
        post = cz.fit(cz.DPMCommunities(truncation=4, lengthscale=[1.5]), data, method="svi", num_steps=1000,
                      lr=0.05, n_draws=200, progress_bar=False, check_confidence=False)
    assert post.tau.shape == (200,)
    assert abs(float(post.tau.mean()) - TAU) < 0.15, post.tau.mean()
    co = post.coclustering().numpy()
    same = comm[:, None] == comm[None, :]
    assert co[same].mean() > 0.8 and co[~same].mean() < 0.2
    a, b, users = data.item_ids[data.a], data.item_ids[data.b], data.user_ids[data.users]
    p = post.predict_outcomes(a, b, users=users)
    assert np.allclose(p.to_numpy().sum(1), 1.0, atol=1e-12)
    k = np.round(2 * data.y).astype(int)
    probs = p[["p_b", "p_tie", "p_a"]].to_numpy()[np.arange(data.n_pairs), k]
    assert np.mean(np.log(probs)) > np.log(1 / 3) + 0.3  # far better than guessing the three outcomes
    p_new = post.predict_outcomes(a[:20], b[:20])  # a new user: the CRP prior predictive
    assert np.allclose(p_new.to_numpy().sum(1), 1.0, atol=1e-12)
    decided = post.predict_proba(a[:20], b[:20], users=users[:20])
    assert np.allclose(decided, p["p_a"][:20] / (p["p_a"][:20] + p["p_b"][:20]))
    dt = post.to_arviz(n_draws=50)
    assert dt["posterior"]["tau"].shape == (1, 200)
    assert np.isfinite(dt["log_likelihood"]["y"].to_numpy()).all()


@pytest.mark.slow
def test_nuts_and_svi_agree_on_the_tie_threshold():
    data, _ = _crowd()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cz.ConvergenceWarning)
        model = cz.DPMCommunities(truncation=2, lengthscale=[1.5])
        nuts = cz.fit(model, data, method="nuts", num_samples=300, warmup_steps=300, progress_bar=False,
                      check_confidence=False)
        svi = cz.fit(model, data, method="svi", num_steps=1000, lr=0.05, n_draws=300, progress_bar=False,
                     check_confidence=False)
    assert abs(float(nuts.tau.mean()) - TAU) < 0.15
    assert abs(float(nuts.tau.mean()) - float(svi.tau.mean())) < 0.1


def _three_way_log_loss(post, data):
    a, b, u = data.item_ids[data.a], data.item_ids[data.b], data.user_ids[data.users]
    p = post.predict_outcomes(a, b, users=u)[["p_b", "p_tie", "p_a"]].to_numpy()
    k = np.round(2 * data.y).astype(int)
    return -np.mean(np.log(p[np.arange(data.n_pairs), k]))


def test_gibbs_marginal_score_is_the_three_outcome_predictive():
    """A user's score under another community (its EP posterior) and under a new one (the GP prior)
    is log n_c + Σ_p log P(y_p) of the closed-form predictive (Eq. 3 at the shifted means), here in
    probability space from the community's whitened mean and covariance."""
    data, _ = _crowd(n_users=4, per_user=10)
    setup = cz.DPMCommunities(lengthscale=[1.5], n_inducing=6).setup(data)
    rule = _Marginal(setup, data, dict(damping=0.5, max_iter=200, tol=1e-8))
    tau = 0.45
    rule.set_tie_threshold(tau)
    z = np.array([0, 1, 1, 0])
    rule.start(z)
    u = 0
    ids, logp = rule.score(u, 0, {0: 2, 1: 2}, lam=0.7)
    idx = rule.labels[u]
    a, b = torch.as_tensor(data.a)[idx], torch.as_tensor(data.b)[idx]
    t_p = tau * tie_scale(setup.gp.pair_terms(a, b)[1], setup.s, setup.alpha)
    k = torch.as_tensor(np.round(2 * (1 - data.y[idx.numpy()])).astype(int))  # column of (p_a, p_tie, p_b)
    Gu = rule.G[idx]

    def log_pred(mean, var):
        return float(predictive_outcomes(mean, var, t_p)[torch.arange(len(k)), k].log().sum())

    m1, S1 = rule.summary(1)
    assert ids == [0, 1, -1]
    assert abs(float(logp[1]) - (np.log(2) + log_pred(Gu @ m1, ((Gu @ S1) * Gu).sum(1)))) < 1e-9
    assert abs(float(logp[2]) - (np.log(0.7) + log_pred(torch.zeros(len(k), dtype=torch.float64),
                                                        (Gu * Gu).sum(1)))) < 1e-9


def test_gibbs_joint_score_is_the_ratio_of_ordinal_ep_evidences():
    """The joint rule in whitened coordinates against EP on the unwhitened prior N(0, K_mm / s) with
    rows H and thresholds τ · tie scale built here: log n_c + log Z_EP(D_c ∪ D_u) − log Z_EP(D_c), and
    log λ + log Z_EP(D_u) for a new community."""
    data, _ = _crowd(n_users=4, per_user=10)
    setup = cz.DPMCommunities(lengthscale=[1.5], n_inducing=6).setup(data)
    rule = _Joint(setup, data, dict(damping=0.5, max_iter=2000, tol=1e-10), cache_size=100)
    tau = 0.45
    rule.set_tie_threshold(tau)
    rule.start(np.array([0, 1, 1, 0]))
    ids, logp = rule.score(0, 0, {0: 2, 1: 2}, lam=0.7)
    sgn = 2 * torch.as_tensor(data.y) - 1
    t_p = tau * tie_scale(setup.gp.pair_terms(torch.as_tensor(data.a), torch.as_tensor(data.b))[1], setup.s,
                          setup.alpha)

    def log_z(users):
        idx = torch.as_tensor(np.flatnonzero(np.isin(data.users, users)))
        return ep_fixed_s(setup.K, setup.H[idx], sgn[idx], tol=1e-10, max_iter=2000, threshold=t_p[idx])[4]

    assert ids == [0, 1, -1]
    want = [np.log(1) + log_z([0, 3]) - log_z([3]), np.log(2) + log_z([0, 1, 2]) - log_z([1, 2]),
            np.log(0.7) + log_z([0])]
    assert np.allclose(logp.numpy(), want, atol=1e-6), (logp, want)


def test_gibbs_recovers_the_tie_threshold_and_the_communities():
    data, comm = _crowd()
    post = cz.fit(cz.DPMCommunities(lengthscale=[1.5]), data, method="gibbs", n_sweeps=40, burn_in=15,
                  n_chains=1, progress_bar=False)
    assert post.tau.shape == (25,) and post.trace["tau"].shape == (1, 40)
    assert abs(float(post.tau.mean()) - TAU) < 0.15, post.tau.mean()
    assert 0.15 < post.trace["tau_accepted"].mean() < 0.85  # the random walk moves
    co = post.coclustering().numpy()
    same = comm[:, None] == comm[None, :]
    assert co[same].mean() > 0.8 and co[~same].mean() < 0.2
    p = post.predict_outcomes(data.item_ids[data.a[:20]], data.item_ids[data.b[:20]])  # a new user
    assert np.allclose(p.to_numpy().sum(1), 1.0, atol=1e-12)
    assert _three_way_log_loss(post, data) < np.log(3) - 0.3  # far better than guessing the outcomes
    dt = post.to_arviz()
    assert dt["posterior"]["tau"].shape == (1, 25)


@pytest.mark.slow
def test_gibbs_samples_the_ep_posterior_of_the_threshold():
    """One community (λ so small that no user leaves it): the chain's τ against p(τ) Z_EP(D; τ) on a
    grid of log τ (EP refitted at each point): mean .682, sd .168. Measured with 2 chains × 200 kept
    sweeps, seeds 0–3: means .665, .665, .670, .657 (at most .15 sd off), sds .172, .151, .141, .161;
    one long run (2 × 1500 kept, seed 10) .676 and .160. Without the Jacobian of log τ the grid's mean
    would be .639, without the prior .737."""
    data, _ = _crowd(n_users=3, per_user=15, seed=3, one_community=True)
    model = cz.DPMCommunities(concentration=1e-8, lengthscale=[1.5], n_inducing=6)
    st = model.setup(data)
    sgn = 2 * torch.as_tensor(data.y) - 1
    scale = tie_scale(st.gp.pair_terms(torch.as_tensor(data.a), torch.as_tensor(data.b))[1], st.s, st.alpha)
    theta = torch.linspace(np.log(0.03), np.log(3.0), 120, dtype=torch.float64)
    log_z = torch.tensor([ep_fixed_s(st.K, st.H, sgn, threshold=t.exp() * scale, tol=1e-10, max_iter=1000)[4]
                          for t in theta])
    w = torch.softmax(log_z + model.prior_tau().log_prob(theta.exp()) + theta, 0)
    mean = float((w * theta.exp()).sum())
    sd = float((w * (theta.exp() - mean) ** 2).sum().sqrt())
    post = cz.fit(model, data, method="gibbs", n_sweeps=250, burn_in=50, n_chains=2, progress_bar=False)
    assert (post.n_communities().index == 1).all()
    assert abs(float(post.tau.mean()) - mean) < 0.35 * sd, (float(post.tau.mean()), mean, sd)
    assert 0.7 < float(post.tau.std()) / sd < 1.3, (float(post.tau.std()), sd)


@pytest.mark.slow
def test_gibbs_and_svi_agree_on_the_held_out_three_way_log_loss():
    """The same crowd (10 users × 50 labels, a fifth held out) by Gibbs + EP and by svi. Measured on
    seeds 0, 1, 2: held-out three-way log loss Gibbs − svi −.007, −.002, −.004 (and Gibbs − NUTS
    −.006, −.000, −.001; NUTS 300 + 300 draws, truncation 2); τ .530, .527, .614 against svi's .581,
    .525, .657 and NUTS's .580, .535, .664. The tolerance .02 is near three times the largest gap."""
    data, _ = _crowd(per_user=50)
    rows = np.arange(data.n_pairs)
    held = rows % 5 == 4
    train, test = data.subset(rows[~held]), data.subset(rows[held])
    gibbs = cz.fit(cz.DPMCommunities(lengthscale=[1.5]), train, method="gibbs", n_sweeps=40, burn_in=15,
                   n_chains=1, progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cz.ConvergenceWarning)
        svi = cz.fit(cz.DPMCommunities(truncation=4, lengthscale=[1.5]), train, method="svi", num_steps=1000,
                     lr=0.05, n_draws=200, progress_bar=False, check_confidence=False)
    gap = _three_way_log_loss(gibbs, test) - _three_way_log_loss(svi, test)
    assert abs(gap) < 0.02, gap
    assert abs(float(gibbs.tau.mean()) - float(svi.tau.mean())) < 0.15


USER_TAUS = np.array([0.2, 0.6, 1.6, 1.0])


def _users_with_own_thresholds(per_user=150, n_items=12, seed=0):
    """Four users in two communities (even and odd ids, utilities ±1.5 x), user u's ties at its own
    threshold ``USER_TAUS[u]``."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 3, size=(n_items, 1))
    f = np.stack([1.5 * X[:, 0], -1.5 * X[:, 0]])
    c = np.arange(len(USER_TAUS)) % 2
    u = np.repeat(np.arange(len(USER_TAUS)), per_user)
    a = rng.integers(0, n_items, u.size)
    b = (a + rng.integers(1, n_items, u.size)) % n_items
    delta = torch.as_tensor(f[c[u], a] - f[c[u], b])
    y = sample_outcomes(delta, torch.as_tensor(USER_TAUS[u]), "probit", torch.Generator().manual_seed(seed))
    return cz.PairwiseData.from_arrays(a, b, y.numpy(), X, users=u, ties="model")


@pytest.mark.slow
def test_svi_recovers_each_users_tie_threshold_and_beats_one_for_the_crowd():
    """Measured (seed 0, 480 training labels, a fifth held out): τ_u .187, .772, 1.358, .921 against
    .2, .6, 1.6, 1.0; one τ for the crowd .74; held-out three-way log loss .467 per user against .530."""
    data = _users_with_own_thresholds()
    rows = np.arange(data.n_pairs)
    held = rows % 5 == 4
    train, test = data.subset(rows[~held]), data.subset(rows[held])
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cz.ConvergenceWarning)
        for tt in ("per_user", "crowd"):
            fits[tt] = cz.fit(cz.DPMCommunities(truncation=3, lengthscale=[1.5], tie_threshold=tt), train,
                              method="svi", num_steps=1000, lr=0.05, n_draws=200, progress_bar=False,
                              check_confidence=False)
    tau = fits["per_user"].tau
    assert tau.shape == (200, 4)
    assert np.all(np.abs(tau.mean(0).numpy() - USER_TAUS) < 0.2 * USER_TAUS + 0.1), tau.mean(0)
    assert _three_way_log_loss(fits["per_user"], test) < _three_way_log_loss(fits["crowd"], test) - 0.02
    post, a, b = fits["per_user"], test.item_ids[test.a[:10]], test.item_ids[test.b[:10]]
    # a new user: the users' median τ in each draw, the same as a crowd τ at that median
    new = post.predict_outcomes(a, b).to_numpy()
    assert np.allclose(new.sum(1), 1.0, atol=1e-12)
    median = post.tau.median(-1).values
    post.tau = median
    assert np.allclose(post.predict_outcomes(a, b).to_numpy(), new, atol=1e-12)
    post.tau = tau
    dt = post.to_arviz()
    assert dt["posterior"]["tau"].shape == (1, 200, 4)


@pytest.mark.slow
def test_nuts_recovers_each_users_tie_threshold():
    """The same crowd as the svi test, by NUTS (200 + 200 draws, one chain): each user's τ_u near the
    truth .2, .6, 1.6, 1.0, within the tolerance of the svi and Gibbs tests, and the held-out three-way
    log loss below one crowd τ's by svi. Measured (about 30 s): τ_u .203, .772, 1.368, .925; log loss
    .467 against .530."""
    data = _users_with_own_thresholds()
    rows = np.arange(data.n_pairs)
    held = rows % 5 == 4
    train, test = data.subset(rows[~held]), data.subset(rows[held])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cz.ConvergenceWarning)
        nuts = cz.fit(cz.DPMCommunities(truncation=3, lengthscale=[1.5], tie_threshold="per_user"), train,
                      method="nuts", num_samples=200, warmup_steps=200, num_chains=1, progress_bar=False,
                      check_confidence=False)
        crowd = cz.fit(cz.DPMCommunities(truncation=3, lengthscale=[1.5]), train, method="svi",
                       num_steps=1000, lr=0.05, n_draws=200, progress_bar=False, check_confidence=False)
    tau = nuts.tau
    assert tau.shape == (200, 4)
    assert np.all(np.abs(tau.mean(0).numpy() - USER_TAUS) < 0.2 * USER_TAUS + 0.1), tau.mean(0)
    assert _three_way_log_loss(nuts, test) < _three_way_log_loss(crowd, test) - 0.02


def test_gibbs_recovers_each_users_tie_threshold_and_beats_one_for_the_crowd():
    """The same crowd as the svi test, by Gibbs (40 sweeps, 15 burn-in, one chain; about 10 s and 6 s).
    Measured: τ_u .181, .798, 1.340, .959 against .2, .6, 1.6, 1.0; one τ .735; held-out three-way log
    loss .465 per user against .532."""
    data = _users_with_own_thresholds()
    rows = np.arange(data.n_pairs)
    held = rows % 5 == 4
    train, test = data.subset(rows[~held]), data.subset(rows[held])
    fits = {tt: cz.fit(cz.DPMCommunities(lengthscale=[1.5], tie_threshold=tt), train, method="gibbs",
                       n_sweeps=40, burn_in=15, n_chains=1, progress_bar=False)
            for tt in ("per_user", "crowd")}
    tau = fits["per_user"].tau
    assert tau.shape == (25, 4) and fits["per_user"].trace["tau"].shape == (1, 40, 4)
    assert np.all(np.abs(tau.mean(0).numpy() - USER_TAUS) < 0.2 * USER_TAUS + 0.1), tau.mean(0)
    assert _three_way_log_loss(fits["per_user"], test) < _three_way_log_loss(fits["crowd"], test) - 0.02
    with pytest.raises(cz.DataError, match="tie_threshold"):
        cz.DPMCommunities(tie_threshold="each")


def test_tie_prior_must_be_a_positive_distribution():
    with pytest.raises(cz.DataError, match="tie_prior"):
        cz.DPMCommunities(tie_prior=pyro.distributions.Normal(0.0, 1.0))
    with pytest.raises(cz.DataError, match="DPMCommunities\\(tie_prior"):
        gp = cz.GPPL(item_residual=False, tie_prior=pyro.distributions.LogNormal(0.0, 1.0))
        cz.DPMCommunities(item_gp=gp)
