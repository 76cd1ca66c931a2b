"""Expectation propagation with probit sites on directions of a Gaussian: the site algebra every
EP route of the zoo shares (GPPL's, the DPM communities').

Prior f ~ N(0, K); each label p is a factor Φ(sgn_p h_pᵀ f) of one direction h_p, replaced by a
rank-one Gaussian site exp(−½ τ_p z² + ν_p z) in z = h_pᵀ f (Minka 2001; Rasmussen & Williams
2006, §3.6 for the moments). Sites are updated in parallel with damping, in natural parameters, so
one sweep costs O(M³ + P M²), vectorised over labels; the EP evidence (R&W Eq. 3.65 with rank-one
sites) comes with the result.

Ties (``threshold`` given: each row's tie threshold t_p ≥ 0, on the scale of z; not to be confused with
the sites' precisions τ_p): the factor is the ordered probit of :mod:`crowdzoo.gp.ordinal` at Δ = z,

    Φ(z − t_p)  (sgn_p = 1),    Φ(−z − t_p)  (sgn_p = −1),    Φ(t_p − z) − Φ(−t_p − z)  (sgn_p = 0, a tie),

the probability that z + ε, ε ~ N(0, 1), falls in (t_p, ∞), (−∞, −t_p) or [−t_p, t_p]. Under a cavity
z ~ N(m, v), z + ε ~ N(m, 1 + v), so the tilted normaliser is the same outcome probability at
Δ = m/√(1 + v) and threshold t_p/√(1 + v), and its mean and variance are the truncated normal's
(the EP of Gaussian-process ordinal regression, Chu & Ghahramani 2005, §3.2;
:func:`ordinal_tilted_moments`). A decided row at t_p = 0 is the binary site exactly.

Weights (``weights``: w_p > 0 per row, ``PairwiseData.weights``): a row of weight w_p stands for w_p
copies of its factor. At EP's fixed point w identical factors have identical sites, so the row keeps
one site whose natural parameters (τ_p, ν_p) are w_p times one copy's, and each update removes one copy,
(τ_p, ν_p)/w_p, from the marginal to form the cavity, matches the tilted moments of one factor against
that cavity (the closed forms above), and sets the row's site to w_p times the copy's new site: power
EP with power 1/w_p (Minka 2004), which for a whole w_p is EP on the rows written w_p times, update for
update. The evidence counts each copy's normaliser, w_p log C̃_p.
"""
from __future__ import annotations

import math

import torch
from torch.special import log_ndtr

from ..errors import NumericalError
from ..gp.linalg import DTYPE, cho_solve, cholesky, logdet_from_chol, solve_lower
from ..gp.ordinal import outcome_derivatives, outcome_log_probs


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


def ordinal_tilted_moments(m, v, sgn, threshold):
    """log Z, mean and variance of the tilted distribution N(z; m, v) · P(y_p | z, t_p) of the ordered
    probit (module docstring), vectorised over rows, decided (``sgn`` ±1) and ties (0) together.

    With s = √(1 + v), Δ = m/s and t = t_p/s, log Z(m) = g(Δ) is the outcome's log-probability at
    (Δ, t) and the tilted moments follow from its derivatives (R&W Eq. 3.58 for the binary case; Chu &
    Ghahramani 2005, §3.2 for an interval): E[z] = m + v g_Δ / s, Var[z] = v + v² g_ΔΔ / s². A decided
    row, ζ = sgn Δ − t, r = φ(ζ)/Φ(ζ): g = log Φ(ζ), g_Δ = sgn r, g_ΔΔ = −r(ζ + r). A tie, u = t − Δ,
    l = −t − Δ, D = Φ(u) − Φ(l) (a log-space difference, exact far in the tails), α = φ(u)/D,
    γ = φ(l)/D: g = log D, g_Δ = γ − α, g_ΔΔ = lγ − uα − g_Δ² (as
    :func:`~crowdzoo.gp.ordinal.outcome_derivatives`, which computes them)."""
    s = torch.sqrt(1.0 + v)
    g, g_d, g_dd, _, _ = outcome_derivatives((sgn + 1.0) / 2.0, m / s, threshold / s)
    return g, m + v * g_d / s, v + v * v * g_dd / (s * s)


def _cavity(m, v, tau, nu):
    v_cav = 1.0 / (1.0 / v - tau)
    m_cav = v_cav * (m / v - nu)
    if (v_cav <= 0).any() or not torch.isfinite(v_cav).all():
        raise NumericalError("EP produced a negative cavity variance. Try: a smaller {damping} "
                             "(e.g. {damping=0.2}) or fewer iterations between checks.",
                             settings=("damping",))
    return m_cav, v_cav


def probit_site_update(m, v, tau, nu, sgn, damping=0.5, threshold=None, weights=None):
    """One damped parallel EP update of rank-one probit sites Φ(sgn_p z_p), from the current marginals
    N(m_p, v_p) of z_p and the sites (τ_p, ν_p): cavity, tilted moments (R&W Eq. 3.58), moment match.
    With ``threshold`` (each row's tie threshold t_p) the sites are the ordered probit's
    (:func:`ordinal_tilted_moments`; ``sgn`` 0 for a tie). With ``weights`` each row's site is w_p
    copies' (module docstring): the cavity removes one copy, the new site is w_p times one copy's.

    Returns the new (τ, ν); raises :class:`NumericalError` on a non-positive cavity variance."""
    w = 1.0 if weights is None else weights
    m_cav, v_cav = _cavity(m, v, tau / w, nu / w)
    if threshold is None:
        denom = torch.sqrt(1.0 + v_cav)
        zi = sgn * m_cav / denom
        ratio = torch.exp(-0.5 * zi * zi - 0.5 * math.log(2 * math.pi) - log_ndtr(zi))
        m_new = m_cav + sgn * v_cav * ratio / denom
        v_new = v_cav - v_cav ** 2 * ratio * (zi + ratio) / (1.0 + v_cav)
    else:
        _, m_new, v_new = ordinal_tilted_moments(m_cav, v_cav, sgn, threshold)
    tau_new = w * (1.0 / v_new - 1.0 / v_cav).clamp_min(0.0)
    nu_new = w * (m_new / v_new - m_cav / v_cav)
    return (1 - damping) * tau + damping * tau_new, (1 - damping) * nu + damping * nu_new


def ep_fixed_s(K, H, sgn, tau=None, nu=None, damping=0.5, max_iter=200, tol=1e-6, L=None, threshold=None,
               weights=None):
    """Parallel damped EP for prior N(0, K) and sites Φ(sgn_p h_pᵀ f) (with ``threshold``, each row's tie
    threshold t_p: the ordered probit's sites, ``sgn`` 0 for a tie; with ``weights``, each row w_p copies
    of its factor; module docstring).

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
        tau, nu = probit_site_update(H @ mu, v, tau, nu, sgn, damping, threshold, weights)
        delta = (mu - mu_old).abs().max().item()
        mu_old = mu
        if delta < tol and it > 1:
            break
    # final posterior and evidence with the final sites
    mu, Sigma, v, C = site_posterior(L, H, tau, nu, HL)
    return mu, Sigma, tau, nu, float(_log_evidence(H, sgn, tau, nu, mu, v, C, threshold, weights)), it


def ep_log_evidence(L, H, sgn, tau, nu, HL=None, threshold=None, weights=None):
    """log Z_EP of prior N(0, L Lᵀ) and probit sites Φ(sgn_p h_pᵀ f) replaced by the rank-one Gaussian
    sites (τ, ν) (R&W Eq. 3.65 with rank-one sites), as a differentiable function of L, H and (with
    ties) the rows' thresholds t_p, whose tilted normalisers are the ordered probit's.

    At an EP fixed point the sites are stationary points of log Z_EP, so with (τ, ν) held fixed the
    gradient of this function with respect to the kernel's hyper-parameters (through L and H) is the
    exact gradient of the EP evidence (Seeger 2005; R&W §5.5.2 for the Laplace analogue). ``weights``:
    each row w_p copies of its factor (module docstring)."""
    mu, _, v, C = site_posterior(L, H, tau, nu, HL)
    return _log_evidence(H, sgn, tau, nu, mu, v, C, threshold, weights)


def ordinal_log_normaliser(m, v, sgn, threshold):
    """log Z = log ∫ N(z; m, v) P(y_p | z, t_p) dz of the ordered probit (module docstring), a
    differentiable function of m, v and t_p (:func:`~crowdzoo.gp.ordinal.outcome_log_probs` at
    Δ = m/√(1 + v), t_p/√(1 + v))."""
    s = torch.sqrt(1.0 + v)
    logp = outcome_log_probs(m / s, threshold / s)
    k = (sgn + 1.0).long().expand(logp.shape[:-1])
    return logp.gather(-1, k[..., None])[..., 0]


def _log_evidence(H, sgn, tau, nu, mu, v, C, threshold=None, weights=None):
    global_part = -0.5 * logdet_from_chol(C) + 0.5 * (H.T @ nu) @ mu  # of the rows' sites together
    w = 1.0 if weights is None else weights
    tau, nu = tau / w, nu / w  # one copy's site and its cavity; each row's copies count w_p times
    v_cav = 1.0 / (1.0 / v - tau)
    m_cav = v_cav * (H @ mu / v - nu)
    if threshold is None:
        log_Z = log_ndtr(sgn * m_cav / torch.sqrt(1.0 + v_cav))
    else:
        log_Z = ordinal_log_normaliser(m_cav, v_cav, sgn, threshold)
    log_C = (log_Z + 0.5 * torch.log1p(v_cav * tau)
             - 0.5 * (nu + m_cav / v_cav) ** 2 / (tau + 1.0 / v_cav) + 0.5 * m_cav ** 2 / v_cav)
    return (w * log_C).sum() + global_part
