"""crowdGPPL's queries in one joint Gaussian across users: the linearised covariance and its fantasy
steps against dense conditioning of the same linear-Gaussian model in the latent Gaussians' space, its
marginals against the draws of the product, and batches that no longer ask every user the same pair."""
from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import pytest
import torch
from torch.special import ndtr

import crowdzoo as cz
from crowdzoo.core.posterior import Posterior
from crowdzoo.core.suggest import candidates, greedy


@pytest.fixture(scope="module")
def post():
    crowd, _ = cz.simulate_crowd(n_items=12, n_users=8, n_pairs=40, n_components=2, n_user_features=0,
                                 seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cz.fit(cz.CrowdGPPL(n_components=2), crowd, seed=0, progress_bar=False)


def _dense_model(dr, a, b, u):
    """θ = (t, v_1..v_C, w_1..w_C) flattened with its draws' covariance, and the product's remainder as
    latent r_c(i, u) ~ N(0, Cov(v_c) ⊗ Cov(w_c)); the rows J (Q, dim) of g_q = J_q (θ, r), written out
    entry by entry."""
    t, V, W = dr["t"], dr["V"], dr["W"]
    S, C, N = V.shape
    U = W.shape[2]
    theta = torch.cat([t, V.reshape(S, -1), W.reshape(S, -1)], 1)
    D = theta.shape[1]
    R = C * N * U
    Sigma = torch.zeros(D + R, D + R, dtype=torch.float64)
    Sigma[:D, :D] = torch.cov(theta.T)
    for c in range(C):
        block = slice(D + c * N * U, D + (c + 1) * N * U)
        Sigma[block, block] = torch.kron(torch.cov(V[:, c].T), torch.cov(W[:, c].T))  # index i · U + u
    v_hat, w_hat = V.mean(0), W.mean(0)
    Q = len(a)
    J = torch.zeros(Q, D + R, dtype=torch.float64)
    for q in range(Q):
        J[q, a[q]] += 1.0
        J[q, b[q]] -= 1.0
        for c in range(C):
            J[q, N + c * N + a[q]] += w_hat[c, u[q]]
            J[q, N + c * N + b[q]] -= w_hat[c, u[q]]
            J[q, N + C * N + c * U + u[q]] += v_hat[c, a[q]] - v_hat[c, b[q]]
            J[q, D + c * N * U + a[q] * U + u[q]] += 1.0
            J[q, D + c * N * U + b[q] * U + u[q]] -= 1.0
    return Sigma, J


def _expected_site(Sigma, d, mean_q):
    """E_y of the covariance after EP's probit site on g_q = d·θ, in precision form with a fine grid
    for g_q | y: independent of the candidates' rank-one column updates."""
    v = d @ Sigma @ d
    x = mean_q + torch.sqrt(v) * torch.linspace(-10, 10, 20001, dtype=torch.float64)
    prior = torch.exp(-0.5 * (x - mean_q) ** 2 / v)
    out = torch.zeros_like(Sigma)
    for py in (ndtr(x), 1 - ndtr(x)):
        w = prior * py
        m_y = (w * x).sum() / w.sum()
        v_y = (w * (x - m_y) ** 2).sum() / w.sum()
        P = torch.linalg.inv(Sigma) + (1.0 / v_y - 1.0 / v) * torch.outer(d, d)
        out += (w.sum() / prior.sum()) * torch.linalg.inv(P)
    return out


def test_joint_fantasy_matches_dense_conditioning_of_the_linearised_gaussian(post):
    items, users = post._query_ids()
    a, b, u = candidates(items, users)
    keep = np.isin(u, [0, 1, 2]) & (a < 6) & (b < 6)  # 45 queries of 3 users on 6 items
    a, b, u = a[keep], b[keep], u[keep]
    Q = post._queries(a, b, u, n_draws=600, seed=3)
    dr = post.sample(600, seed=3)
    Sigma, J = _dense_model(dr, a, b, u)
    t_hat, v_hat, w_hat = dr["t"].mean(0), dr["V"].mean(0), dr["W"].mean(0)
    mean = torch.stack([t_hat[a[q]] - t_hat[b[q]] + ((v_hat[:, a[q]] - v_hat[:, b[q]]) * w_hat[:, u[q]]).sum()
                        for q in range(len(a))])
    assert torch.allclose(Q.mean, mean, atol=1e-10)
    dense = J @ Sigma @ J.T
    assert torch.allclose(Q.var, torch.diagonal(dense), rtol=1e-8)
    assert torch.allclose(Q.column(7), dense[:, 7], rtol=1e-8, atol=1e-12)
    # another user's query on the same items is correlated through t and the v_c, and the same user's
    # query on other items through the remainder too
    other = np.flatnonzero((a == a[7]) & (b == b[7]) & (u != u[7]))
    assert other.size and (dense[other, 7] > 0.2 * dense[7, 7]).all()
    same_user = np.flatnonzero((u == u[7]) & (a != a[7]) & (b != b[7]))
    assert (Q.column(7)[same_user] != 0).all()
    for q in (7, 30, 2, 8):  # four fantasy steps, on three users
        Sigma = _expected_site(Sigma, J[q], mean[q])
        Q.fantasy(q)
        assert torch.allclose(Q.var, torch.diagonal(J @ Sigma @ J.T), rtol=1e-5, atol=1e-8)
    assert torch.allclose(Q.column(11) - Q.V.T @ Q.V[:, 11], (J @ Sigma @ J.T)[:, 11], rtol=1e-5, atol=1e-8)


def test_joint_marginals_match_the_products_draws(post):
    """The linearised variance plus the product's remainder is the variance of g = Δt + Σ_c Δv_c w_cu
    over the posterior's draws (the independent route: no linearisation), and so is the covariance of
    two queries of one user on different items."""
    items, users = post._query_ids()
    a, b, u = candidates(items, users)
    Q = post._queries(a, b, u, n_draws=4000, seed=1)
    dr = post.sample(4000, seed=1)
    g = dr["t"][:, a] - dr["t"][:, b] + ((dr["V"][:, :, a] - dr["V"][:, :, b]) * dr["W"][:, :, u]).sum(1)
    assert torch.allclose(Q.mean, g.mean(0), atol=0.05 * float(g.std(0).max()))
    ratio = Q.var / g.var(0)
    assert 0.9 < float(ratio.mean()) < 1.1 and float((ratio - 1).abs().max()) < 0.3
    same_user = np.flatnonzero(u == u[0])
    mc = ((g[:, same_user] - g[:, same_user].mean(0)) * (g[:, :1] - g[:, 0].mean())).mean(0)
    assert torch.allclose(Q.column(0)[same_user], mc, atol=0.1 * float(Q.var[0]))


def test_a_batch_spreads_over_item_pairs_across_users(post):
    """With the users independent (the per-user Gaussians of the generic hook) the fantasy step of
    (u, a, b) leaves (u', a, b) its score, and a batch asks every user the same pair; in the joint
    Gaussian it lowers it through the shared consensus and components."""
    items, users = post._query_ids()
    a, b, u = candidates(items, users)

    def most_repeated(queries):
        pick, _ = greedy(queries, 12, "bald", seed=0)
        pairs = Counter(zip(np.minimum(a[pick], b[pick]).tolist(), np.maximum(a[pick], b[pick]).tolist()))
        return max(pairs.values()), len(pairs)

    independent = most_repeated(Posterior._queries(post, a, b, u))
    joint = most_repeated(post._queries(a, b, u))
    assert independent[0] >= 6  # the contrast: per-user Gaussians repeat one pair for most of the 8 users
    assert joint[0] <= independent[0] - 2 and joint[1] >= independent[1] + 2
    batch = post.suggest(12, seed=0)
    assert not batch.duplicated(["user", "a", "b"]).any()
