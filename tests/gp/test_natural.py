"""The natural-parameter Gaussian block (crowdzoo.gp.natural) against closed forms: a full step on a
Gaussian likelihood is the conjugate posterior, repeated small steps converge to it, and the KL term
is torch's KL between Gaussians when s is known."""
import math

import torch

from crowdzoo.gp import natural
from crowdzoo.gp.linalg import DTYPE


def _problem(n=4, P=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, n, generator=g, dtype=DTYPE)
    K = X @ X.T + n * torch.eye(n, dtype=DTYPE)
    A = torch.randn(P, n, generator=g, dtype=DTYPE)
    y = torch.randn(P, generator=g, dtype=DTYPE)
    return K, A, y


def _posterior(K, A, y, s, noise):
    """N(m, S) of x ~ N(0, K/s), y = A x + N(0, noise I), by the covariance form (no precisions)."""
    prior = K / s
    G = A @ prior @ A.T + noise * torch.eye(A.shape[0], dtype=DTYPE)
    gain = prior @ A.T @ torch.linalg.inv(G)
    return gain @ y, prior - gain @ A @ prior


def _likelihood(A, y, noise):
    return A.T @ A / noise, A.T @ y / noise


def test_a_full_step_is_the_conjugate_posterior():
    K, A, y = _problem()
    s, noise = 2.0, 0.5
    K_inv = torch.linalg.inv(K)
    q0 = natural.gaussian(s * K_inv, torch.zeros(4, dtype=DTYPE))
    q = natural.step(q0, s * K_inv, *_likelihood(A, y, noise), rho=1.0)
    m, S = _posterior(K, A, y, s, noise)
    torch.testing.assert_close(q.m, m, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(q.S, S, rtol=1e-10, atol=1e-10)


def test_small_steps_converge_to_the_posterior_and_batch():
    """ρ = 0.3 steps from the prior converge geometrically to the same fixed point; a batch of three
    independent blocks steps as three separate ones."""
    K, A, y = _problem()
    s, noise = 1.5, 0.3
    K_inv = torch.linalg.inv(K).expand(3, 4, 4)
    Lam_lik, eta_lik = _likelihood(A, y, noise)
    q = natural.gaussian(s * K_inv, torch.zeros(3, 4, dtype=DTYPE))
    for _ in range(120):
        q = natural.step(q, s * K_inv, Lam_lik.expand(3, 4, 4), eta_lik.expand(3, 4), rho=0.3)
    m, S = _posterior(K, A, y, s, noise)
    for c in range(3):
        torch.testing.assert_close(q.m[c], m, rtol=1e-8, atol=1e-8)
        torch.testing.assert_close(q.S[c], S, rtol=1e-8, atol=1e-8)


def test_diagonal_block_is_the_product_of_scalars():
    Lam, eta = torch.tensor([2.0, 4.0], dtype=DTYPE), torch.tensor([1.0, -2.0], dtype=DTYPE)
    prior, lik = torch.ones(2, dtype=DTYPE), torch.tensor([1.0, 3.0], dtype=DTYPE)
    q = natural.step(natural.gaussian(Lam, eta), prior, lik, torch.tensor([0.5, 0.5], dtype=DTYPE), rho=0.5)
    Lam1 = 0.5 * Lam + 0.5 * torch.tensor([2.0, 4.0], dtype=DTYPE)
    eta1 = 0.5 * eta + 0.25
    torch.testing.assert_close(q.S, 1 / Lam1)
    torch.testing.assert_close(q.m, eta1 / Lam1)


def test_kl_is_the_gaussian_kl_when_s_is_known():
    K, A, y = _problem()
    s = 3.0
    m, S = _posterior(K, A, y, s, 0.7)
    q = natural.gaussian(torch.linalg.inv(S), torch.linalg.solve(S, m))
    kl = natural.kl(q, torch.linalg.inv(K), torch.logdet(K), torch.tensor(s, dtype=DTYPE),
                    torch.tensor(math.log(s), dtype=DTYPE))
    Normal = torch.distributions.MultivariateNormal
    ref = torch.distributions.kl_divergence(Normal(m, S), Normal(torch.zeros(4, dtype=DTYPE), K / s))
    torch.testing.assert_close(kl, ref, rtol=1e-10, atol=1e-10)
