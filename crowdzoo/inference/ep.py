"""Expectation propagation with probit sites on directions of a Gaussian: the site algebra every
EP route of the zoo shares (GPPL's; the DPM communities' next).

Prior f ~ N(0, K); each label p is a factor Φ(sgn_p h_pᵀ f) of one direction h_p, replaced by a
rank-one Gaussian site exp(−½ τ_p z² + ν_p z) in z = h_pᵀ f (Minka 2001; Rasmussen & Williams
2006, §3.6 for the moments). Sites are updated in parallel with damping, in natural parameters, so
one sweep costs O(M³ + P M²), vectorised over labels; the EP evidence (R&W Eq. 3.65 with rank-one
sites) comes with the result.
"""
from __future__ import annotations

import math

import torch
from torch.special import log_ndtr

from ..errors import NumericalError
from ..gp.linalg import DTYPE, cho_solve, cholesky, logdet_from_chol, solve_lower


def site_posterior(L, H, tau, nu, HL=None):
    """The Gaussian N(mu, Sigma) of the prior N(0, L Lᵀ) times rank-one sites exp(−½ τ_p z_p² + ν_p z_p)
    on z_p = h_pᵀ f, through the Cholesky C of I + Lᵀ Hᵀ diag(τ) H L (stable when τ_p = 0).

    Returns (mu, Sigma, v, C) with v_p = h_pᵀ Sigma h_p the marginal variances."""
    HL = H @ L if HL is None else HL  # (P, M): rows Lᵀ h_p
    C = cholesky(torch.eye(L.shape[0], dtype=DTYPE) + HL.T @ (tau[:, None] * HL),
                 what="EP matrix I + Lᵀ Λ L")
    V = solve_lower(C, HL.T)  # (M, P)
    Sigma = L @ cho_solve(C, L.T)
    return Sigma @ (H.T @ nu), Sigma, (V * V).sum(0), C


def probit_site_update(m, v, tau, nu, sgn, damping=0.5):
    """One damped parallel EP update of rank-one probit sites Φ(sgn_p z_p), from the current marginals
    N(m_p, v_p) of z_p and the sites (τ_p, ν_p): cavity, tilted moments (R&W Eq. 3.58), moment match.

    Returns the new (τ, ν); raises :class:`NumericalError` on a non-positive cavity variance."""
    v_cav = 1.0 / (1.0 / v - tau)
    m_cav = v_cav * (m / v - nu)
    if (v_cav <= 0).any() or not torch.isfinite(v_cav).all():
        raise NumericalError("EP produced a negative cavity variance. Try: a smaller {damping} "
                             "(e.g. {damping=0.2}) or fewer iterations between checks.",
                             settings=("damping",))
    denom = torch.sqrt(1.0 + v_cav)
    zi = sgn * m_cav / denom
    ratio = torch.exp(-0.5 * zi * zi - 0.5 * math.log(2 * math.pi) - log_ndtr(zi))
    m_new = m_cav + sgn * v_cav * ratio / denom
    v_new = v_cav - v_cav ** 2 * ratio * (zi + ratio) / (1.0 + v_cav)
    tau_new = (1.0 / v_new - 1.0 / v_cav).clamp_min(0.0)
    nu_new = m_new / v_new - m_cav / v_cav
    return (1 - damping) * tau + damping * tau_new, (1 - damping) * nu + damping * nu_new


def ep_fixed_s(K, H, sgn, tau=None, nu=None, damping=0.5, max_iter=200, tol=1e-6, L=None):
    """Parallel damped EP for prior N(0, K) and sites Φ(sgn_p h_pᵀ f).

    ``L``: the Cholesky factor of K when the caller already has it (e.g. one prior for many fits).
    Returns (mu, Sigma, tau, nu, log_Z, n_iter).
    """
    P, M = H.shape
    tau = torch.zeros(P, dtype=DTYPE) if tau is None else tau.clone()
    nu = torch.zeros(P, dtype=DTYPE) if nu is None else nu.clone()
    L = cholesky(K, what="K_mm / s (EP prior)") if L is None else L
    mu_old = torch.zeros(M, dtype=DTYPE)
    HL = H @ L  # (P, M): rows Lᵀ h_p
    for it in range(1, max_iter + 1):
        mu, Sigma, v, _ = site_posterior(L, H, tau, nu, HL)
        tau, nu = probit_site_update(H @ mu, v, tau, nu, sgn, damping)
        delta = (mu - mu_old).abs().max().item()
        mu_old = mu
        if delta < tol and it > 1:
            break
    # final posterior and evidence with the final sites
    mu, Sigma, v, C = site_posterior(L, H, tau, nu, HL)
    return mu, Sigma, tau, nu, float(_log_evidence(H, sgn, tau, nu, mu, v, C)), it


def ep_log_evidence(L, H, sgn, tau, nu, HL=None):
    """log Z_EP of prior N(0, L Lᵀ) and probit sites Φ(sgn_p h_pᵀ f) replaced by the rank-one Gaussian
    sites (τ, ν) (R&W Eq. 3.65 with rank-one sites), as a differentiable function of L and H.

    At an EP fixed point the sites are stationary points of log Z_EP, so with (τ, ν) held fixed the
    gradient of this function with respect to the kernel's hyper-parameters (through L and H) is the
    exact gradient of the EP evidence (Seeger 2005; R&W §5.5.2 for the Laplace analogue)."""
    mu, _, v, C = site_posterior(L, H, tau, nu, HL)
    return _log_evidence(H, sgn, tau, nu, mu, v, C)


def _log_evidence(H, sgn, tau, nu, mu, v, C):
    v_cav = 1.0 / (1.0 / v - tau)
    m_cav = v_cav * (H @ mu / v - nu)
    zi = sgn * m_cav / torch.sqrt(1.0 + v_cav)
    log_C = (log_ndtr(zi) + 0.5 * torch.log1p(v_cav * tau)
             - 0.5 * (nu + m_cav / v_cav) ** 2 / (tau + 1.0 / v_cav) + 0.5 * m_cav ** 2 / v_cav)
    return log_C.sum() - 0.5 * logdet_from_chol(C) + 0.5 * (H.T @ nu) @ mu
