"""crowdBT–GP: the crowdBT stage finds unreliable workers; the GP stage ranks the consensus."""
import numpy as np
import pytest
from scipy.stats import kendalltau

import crowdzoo as cz


@pytest.fixture(scope="module")
def spammed():
    data, truth = cz.simulate_crowd(n_items=50, n_users=24, n_pairs=2400, n_components=2, s_t=0.3, seed=4)
    flipped = np.arange(6)  # a quarter of the workers answer the opposite of what they think
    y = np.where(np.isin(data.users, flipped), 1 - data.y, data.y)
    d = cz.PairwiseData.from_arrays(data.a, data.b, y, data.item_features, users=data.users)
    return d, truth, flipped


def test_crowdbt_finds_the_flipped_workers_and_the_consensus(spammed):
    d, truth, flipped = spammed
    post = cz.fit(cz.CrowdBTGP(n_inducing=30), d, method="map")
    eta = post.reliability.to_numpy()
    assert eta[flipped].max() < 0.3 and np.median(np.delete(eta, flipped)) > 0.8
    tau = kendalltau(post.utilities()[0].to_numpy(), truth["t"]).statistic
    assert tau > 0.6
    # a Bradley–Terry fit that trusts everyone (reliability pinned near 1) does worse
    naive = cz.fit(cz.CrowdBTGP(n_inducing=30, reliability_prior=(1e4, 1.0), reliable_share=1.0), d,
                   method="map")
    assert kendalltau(naive.utilities()[0].to_numpy(), truth["t"]).statistic < tau


def test_crowdbt_gp_predictions_are_probabilities_of_one_event(spammed):
    d, _, _ = spammed
    post = cz.fit(cz.CrowdBTGP(n_inducing=20), d, method="map")
    ids = d.item_ids
    p_ab = post.predict_proba(ids[d.a[:50]], ids[d.b[:50]])
    p_ba = post.predict_proba(ids[d.b[:50]], ids[d.a[:50]])
    np.testing.assert_allclose(p_ab + p_ba, 1.0, atol=1e-12)
    new = post.predict_proba([0, 1], [1, 0], item_features=d.item_features[:2] + 0.1)
    assert new.shape == (2,) and np.all((new > 0) & (new < 1))


def test_map_route_belongs_to_crowdbt_gp(spammed):
    d, _, _ = spammed
    # the messages come from the zoo's table: the model's own routes
    with pytest.raises(cz.DataError, match=r"gppl has no route 'map'; its routes are \['natgrad', 'ep'"):
        cz.fit(cz.GPPL(), d, method="map")
    with pytest.raises(cz.DataError, match=r"crowdbt-gp has no route 'natgrad'; its routes are \['map'\]"):
        cz.fit(cz.CrowdBTGP(), d, method="natgrad")


def test_crowdbt_gp_to_arviz_and_report(spammed, tmp_path):
    """Draws of g reproduce the GP's utilities (Monte Carlo against the closed form); the
    per-label log-likelihood sums to the model's crowdBT log-likelihood at each draw; the MAP
    reliabilities are marked as point estimates; the report runs."""
    import torch

    from crowdzoo.models.baselines.crowdbt_gp import crowdbt_log_lik

    d, _, flipped = spammed
    post = cz.fit(cz.CrowdBTGP(n_inducing=30), d, method="map")
    assert post.settings["converged"] and post.trace["loss"][-1] < post.trace["loss"][0]
    dt = post.to_arviz(n_draws=3000, seed=1)
    g = dt.posterior["g"].values.reshape(3000, -1)
    mean, var = post.utilities()
    assert np.abs(g.mean(0) - mean.to_numpy()).max() < 5 * np.sqrt(var.to_numpy().max() / 3000)
    np.testing.assert_allclose(g.var(0), var.to_numpy(), rtol=0.15)
    eta = torch.as_tensor(post.reliability.to_numpy())
    ll = dt.log_likelihood["y"].values.reshape(3000, -1)
    a, b, k, y = (torch.as_tensor(x) for x in (d.a, d.b, d.users, d.y.astype(float)))
    for s in (0, 1234):
        ref = crowdbt_log_lik(torch.as_tensor(g[s]), torch.logit(eta), a, b, k, y)
        assert ll[s].sum() == pytest.approx(float(ref), rel=1e-9)
    eta_draws = dt.posterior["eta"]
    assert "MAP" in eta_draws.attrs["estimate"]
    np.testing.assert_array_equal(eta_draws.values[0, -1], post.reliability.to_numpy())
    assert float(eta_draws.std(("chain", "draw")).max()) < 1e-12
    rep = cz.report(post, tmp_path / "crowdbt.md")
    assert {"PPC: item win rates", "optimisation"} <= {c.name for c in rep.checks} | {"optimisation"}
    assert any("utilities g" in k for k in rep.figures) and rep.path.read_text().startswith("# ")


def test_crowdbt_predicts_each_worker_by_its_reliability(spammed):
    """Held-out labels of workers who answer the opposite: the consensus is confidently wrong for them
    (log loss above a coin); the worker's own predictive η_k p + (1 − η_k)(1 − p) is right (below a
    coin), and over all workers it beats the consensus. A new worker gets the prior's η̄."""
    d, _, flipped = spammed
    n = 2000
    train = cz.PairwiseData.from_arrays(d.a[:n], d.b[:n], d.y[:n], d.item_features, users=d.users[:n])
    post = cz.fit(cz.CrowdBTGP(n_inducing=30), train, method="map")
    ids, uids = d.item_ids, train.user_ids
    a, b, y, u = ids[d.a[n:]], ids[d.b[n:]], d.y[n:], uids[d.users[n:]]

    def log_loss(p, rows):
        return float(-np.mean(np.where(y[rows] == 1, np.log(p[rows]), np.log1p(-p[rows]))))

    consensus, own = post.predict_proba(a, b), post.predict_proba(a, b, users=u)
    bad = np.isin(d.users[n:], flipped)
    assert log_loss(consensus, bad) > np.log(2) > log_loss(own, bad)
    everyone = np.ones_like(bad)
    assert log_loss(own, everyone) < log_loss(consensus, everyone)
    (al, be), pi = post.model.reliability_prior, post.model.reliable_share
    eta0 = pi * al / (al + be) + (1 - pi) / 2
    new = post.predict_proba(a[:5], b[:5], users=["nobody"] * 5, new_users="prior")
    np.testing.assert_allclose(new, eta0 * consensus[:5] + (1 - eta0) * (1 - consensus[:5]), atol=1e-12)
    np.testing.assert_allclose(post.predict_proba(a[:5], b[:5], users=["nobody"] * 5, new_users="consensus"),
                               consensus[:5], atol=1e-12)
    with pytest.raises(cz.DataError, match="not a training user"):
        post.predict_proba(a[:5], b[:5], users=["nobody"] * 5)


def test_stage2_learns_to_switch_off_an_irrelevant_feature():
    """Scores that vary with the first feature only: stage 2's learned length-scale of the second (the
    irrelevant one) grows far past the median heuristic while the first's stays near it, and the learned
    (ℓ, σ_f², σ_r²) maximise the penalised DTC marginal likelihood — no step of ±0.1 in any log
    coordinate, recomputed from a fresh setup at the stepped ℓ, does better."""
    import dataclasses

    import torch

    from crowdzoo.models.baselines.crowdbt_gp import _dtc
    from crowdzoo.models.gppl.model import GPPL

    rng = np.random.default_rng(0)
    n, P = 40, 1500
    X = rng.uniform(-1, 1, size=(n, 2))
    f = 2.5 * np.sin(2.5 * X[:, 0])
    a, b = rng.integers(0, n, P), rng.integers(0, n, P)
    keep = a != b
    a, b = a[keep], b[keep]
    y = (rng.uniform(size=a.size) < 1 / (1 + np.exp(-(f[a] - f[b])))).astype(float)
    d = cz.PairwiseData.from_arrays(a, b, y, X, users=rng.integers(0, 10, a.size))
    post = cz.fit(cz.CrowdBTGP(), d, method="map")
    ell, ell0 = np.array(post.settings["learned_lengthscale"]), np.array(post.settings["start_lengthscale"])
    assert ell[1] / ell0[1] > 5 and ell[0] / ell0[0] < 3
    # the optimum: recompute the objective −log p(t) − log prior from scratch around the learned θ
    t = torch.as_tensor(post.t.numpy(), dtype=torch.float64)  # every item is labelled
    v = post.score_var
    gp = GPPL(n_inducing=post.model.n_inducing, kernel=post.model.kernel)
    Z = post.setup.Z

    def penalised(log_ell, log_sf2, log_sr2):
        B = dataclasses.replace(gp, lengthscale=torch.exp(log_ell)).setup_features(
            torch.as_tensor(X), inducing=Z).B
        lml, _ = _dtc(B, t, v + np.exp(log_sr2), np.exp(log_sf2), moments=False)
        z = (log_ell - torch.log(torch.as_tensor(ell0))) / post.model.lengthscale_prior_sd
        prior = -0.5 * (z ** 2).sum()
        return float(lml + prior)

    theta = [torch.log(torch.as_tensor(ell)), np.log(post.signal_var), np.log(post.noise_var)]
    best = penalised(*theta)
    for i in range(4):
        for step in (-0.1, 0.1):
            th = [theta[0].clone(), theta[1], theta[2]]
            if i < 2:
                th[0][i] += step
            else:
                th[i - 1] += step
            assert penalised(*th) <= best + 1e-6


def test_reliability_prior_is_a_normalised_mixture_with_its_stated_mean():
    """The log prior of logit η, exponentiated, integrates to 1 over the real line (trapezoid rule),
    and its mean of η = σ(x) by the same quadrature is :func:`prior_mean_reliability`; with π = 1 it
    is the Beta's σ(x)^α σ(−x)^β up to log B(α, β)."""
    import math

    import torch

    from crowdzoo.models.baselines.crowdbt_gp import prior_mean_reliability, reliability_log_prior

    x = torch.linspace(-80.0, 1500.0, 800_001, dtype=torch.float64)  # σ(−x)^0.05 decays slowly
    for model in (cz.CrowdBTGP(), cz.CrowdBTGP(reliability_prior=(3.0, 2.0), reliable_share=0.6)):
        dens = reliability_log_prior(x, model).exp()
        assert float(torch.trapezoid(dens, x)) == pytest.approx(1.0, abs=1e-6)
        mean = float(torch.trapezoid(torch.sigmoid(x) * dens, x))
        assert mean == pytest.approx(prior_mean_reliability(model), abs=1e-6)
    one = cz.CrowdBTGP(reliability_prior=(3.0, 2.0), reliable_share=1.0)
    log_b = math.lgamma(3.0) + math.lgamma(2.0) - math.lgamma(5.0)
    dens = (reliability_log_prior(x, one) - log_b).exp()
    assert float(torch.trapezoid(dens, x)) == pytest.approx(1.0, abs=1e-6)
    assert prior_mean_reliability(one) == pytest.approx(0.6)


def test_honest_workers_with_few_labels_stay_reliable():
    """Honest workers (no one flips), 20 labels each: under the default mixture prior every worker's
    η stays near 1, so a worker's prediction is the consensus's; one Beta(8, ½), loose enough below its
    mode (0.94 for logit η) to find flipped workers, holds them below 0.99 and tempers every
    prediction. The mixture's held-out log loss is the lower."""
    data, _ = cz.simulate_crowd(n_items=40, n_users=100, n_pairs=2500, n_components=1, s_t=0.3, s_v=20.0,
                                seed=2)
    n = 2000
    train = cz.PairwiseData.from_arrays(data.a[:n], data.b[:n], data.y[:n], data.item_features,
                                        users=data.users[:n])
    ids, uids = data.item_ids, train.user_ids
    a, b, y, u = ids[data.a[n:]], ids[data.b[n:]], data.y[n:], uids[data.users[n:]]

    def log_loss(p):
        return float(-np.mean(np.where(y == 1, np.log(p), np.log1p(-p))))

    mixture = cz.fit(cz.CrowdBTGP(n_inducing=20), train, method="map")
    single = cz.fit(cz.CrowdBTGP(n_inducing=20, reliability_prior=(8.0, 0.5), reliable_share=1.0), train,
                    method="map")
    assert mixture.reliability.min() > 0.99 > single.reliability.median()
    own, consensus = mixture.predict_proba(a, b, users=u), mixture.predict_proba(a, b)
    assert np.abs(own - consensus).max() < 0.01
    assert log_loss(own) < log_loss(single.predict_proba(a, b, users=u))


def test_crowdbt_gp_consensus_is_the_logistic_averaged_over_the_score_posterior(spammed):
    """P(a ≻ b) = E[σ(h_a − h_b)] under the posterior of the consensus scores, here by adaptive quadrature
    over N(μ, v) with μ and v read from the scores' joint Gaussian (``utility_gaussian``), in log space
    for both outcomes so that the tails count. The probit approximation Φ(μ / √(8/π + v)) misses the
    logistic's tails: for the most confident pairs here (about 100 labels per item) it put the less likely
    outcome's probability 2.5 to 14 times too low."""
    from scipy.integrate import quad
    from scipy.special import expit
    from scipy.stats import norm

    d, _, _ = spammed
    post = cz.fit(cz.CrowdBTGP(n_inducing=20), d, method="map")
    mean, cov = (np.asarray(x) for x in post.utility_gaussian())
    order = np.argsort(mean)
    a, b = order[-8:], order[:8]  # the most confident pairs: best against worst
    a, b = np.concatenate([a, order[20:28]]), np.concatenate([b, order[21:29]])  # and close ones
    mu = mean[a] - mean[b]
    v = cov[a, a] + cov[b, b] - 2.0 * cov[a, b]
    assert mu.max() > 4.0  # the tails are in play

    def expected(m, var, sign):
        sd = np.sqrt(var)
        return quad(lambda x: expit(sign * (m + sd * x)) * norm.pdf(x), -12, 12, epsabs=0, epsrel=1e-12)[0]

    want_a = np.array([expected(m, s, 1.0) for m, s in zip(mu, v)])
    want_b = np.array([expected(m, s, -1.0) for m, s in zip(mu, v)])
    ids = d.item_ids
    p = post.predict_proba(ids[a], ids[b])
    np.testing.assert_allclose(np.log(p), np.log(want_a), rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.log1p(-p), np.log(want_b), rtol=0, atol=1e-6)
