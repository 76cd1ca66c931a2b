"""The conjugate pieces of every natural-gradient route: the Gamma q(s) of an inverse function scale
(Simpson & Gurevych 2020, Eq. 15), the KL terms of the bound (Eq. 30–31), and the likelihood's pull
on q(s) when inducing points are sparse. Written once; GPPL, crowdGPPL and GPPL-per-user call them.

A function x ~ N(0, K / s) with s ~ Gamma(α₀, β₀) and q(x) = N(m, S), q(s) = Gamma(α, β):

    q(s):  α = α₀ + n/2,   β = β₀ + ½ tr(K⁻¹ (S + m mᵀ))                         (Eq. 15)
    E_q[ln q(x)] − E_q[ln p(x | s)] = ½ (E[s] tr(K⁻¹(S + m mᵀ)) − n − n E[ln s] + ln|K| − ln|S|)
    KL(q(s) ‖ p(s)) for two Gammas.
"""
from __future__ import annotations

import math

import torch

from ..errors import DataError
from .linalg import DTYPE


def _t(x):
    return torch.as_tensor(x, dtype=DTYPE)


def gamma_moments(shape, rate):
    """E[s] and E[ln s] under Gamma(shape, rate)."""
    shape, rate = _t(shape), _t(rate)
    return shape / rate, torch.digamma(shape) - torch.log(rate)


def second_moment(K_inv, m, S):
    """tr(K⁻¹ (S + m mᵀ)), batched over leading dimensions; ``K_inv`` None means K = I with S the
    diagonal variances (same shape as m)."""
    if K_inv is None:
        return (S + m * m).sum(-1)
    return (K_inv * S).sum((-1, -2)) + ((m @ K_inv) * m).sum(-1)


def q_s(alpha0: float, beta0: float, n: int, second):
    """Eq. 15: the Gamma q(s) = (α₀ + n/2, β₀ + ½ tr(K⁻¹ E[x xᵀ])) given ``second`` = the trace."""
    second = _t(second)
    return torch.full_like(second, alpha0 + 0.5 * n), beta0 + 0.5 * second


def kl_gaussian(second, n: int, logdet_K, logdet_S, Es, Elog_s):
    """E_q[ln q(x)] − E_{q(x)q(s)}[ln p(x | s)] for the prior N(0, K/s) (the module docstring)."""
    return 0.5 * (Es * second - n - n * Elog_s + logdet_K - logdet_S)


def kl_gamma(shape, rate, alpha0: float, beta0: float):
    """KL(Gamma(shape, rate) ‖ Gamma(α₀, β₀))."""
    shape, rate = _t(shape), _t(rate)
    return ((shape - alpha0) * torch.digamma(shape) - torch.lgamma(shape) + math.lgamma(alpha0)
            + alpha0 * (torch.log(rate) - math.log(beta0)) + shape * (beta0 - rate) / rate)


def scale_rate(B, shape, X):
    """Rate of q(s) at a stationary point of the bound when the likelihood feels s.

    With sparse inducing points each label's variance carries the conditional variance c_p / E[s]
    (Eq. 14), which the closed form of Eq. 15 (rate B = β₀ + ½ tr(K⁻¹ E[f_m f_mᵀ])) ignores: its
    fixed point is then not a stationary point of the bound, which drifts down over hundreds of
    iterations. Setting the bound's natural gradient in q(s) to zero with E[s] = α/β plugged into
    the conditional variance gives β = B − X β²/α², X = π Σ_p (−∂ELL_p/∂var_p) c_p k_p ≥ 0 (k_p
    the multiplier of the conditional variance in var_p), whose positive root is
    β = 2B / (1 + √(1 + 4XB/α²)); β = B when the inducing points are exact (c = 0). Used by the
    ``"exact"`` likelihood only; ``"linearised"`` keeps the paper's Eq. 15.
    """
    return 2.0 * B / (1.0 + (1.0 + 4.0 * X * B / shape ** 2) ** 0.5)


def require_gamma(prior, what: str, route: str = "natgrad"):
    """(α₀, β₀) of a Gamma prior, or a clear error: the natural-gradient routes need conjugacy."""
    if type(prior).__name__ != "Gamma":
        raise DataError(f"{what}: the {route} route needs a Gamma prior (the conjugate q(s) update of "
                        f"Eq. 15), got {type(prior).__name__}; use method='svi' or 'nuts' for other "
                        "positive priors")
    return float(prior.concentration), float(prior.rate)
