"""A Gaussian factor in natural parameters, its natural-gradient step and its KL to a GP prior: the
block every natural-gradient route is built of (GPPL's q(f_m), crowdGPPL's q(t), q(v_c), q(w_c),
GPPL-per-user's q(f_m,j)), written once; its step, a convex combination in natural coordinates
(:func:`convex`), is also the one BayesSCDC's conjugate globals take.

q(x) = N(m, S) is held by its natural parameters Λ = S⁻¹ and η = S⁻¹ m, with the moments (m, S) they
give (one Cholesky factor of Λ). Blocks batch over leading dimensions (C components, U users), and a
block whose Λ has the shape of η is diagonal (crowdGPPL's independent users: Λ, S the variances'
reciprocals and the variances).

**The step** (Simpson & Gurevych 2020, Eq. 17–18 for GPPL, Eq. 32–37 for crowdGPPL's factors; the
stochastic variational inference of Hoffman et al. 2013): with the prior's precision E[s] K⁻¹ and the
likelihood's natural parameters (Λ_lik, η_lik) estimated from a mini-batch scaled by π_i = P / P_i,

    Λ ← (1 − ρ_i) Λ + ρ_i (E[s] K⁻¹ + Λ_lik),      η ← (1 − ρ_i) η + ρ_i η_lik,

a convex combination of the current natural parameters and their optimum given the batch — the
natural gradient of the bound with step size ρ_i. ρ_i = 1 is the coordinate-ascent update.

**The KL** to the prior N(0, K/s) under q(s) (the Gaussian terms of the bound, Eq. 30–31):
E_q[ln q(x)] − E_q(x)q(s)[ln p(x | s)] (:func:`crowdzoo.gp.conjugate.kl_gaussian`).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .conjugate import kl_gaussian, second_moment
from .linalg import cholesky, logdet_from_chol, sym


class Gaussian(NamedTuple):
    """q(x) = N(``m``, ``S``) with its natural parameters ``Lam`` = S⁻¹ and ``eta`` = S⁻¹ m; shapes
    (..., n, n) and (..., n), or (..., n) throughout for a diagonal block."""

    Lam: torch.Tensor
    eta: torch.Tensor
    m: torch.Tensor
    S: torch.Tensor

    @property
    def diagonal(self) -> bool:
        return self.Lam.dim() == self.eta.dim()


def gaussian(Lam: torch.Tensor, eta: torch.Tensor, what: str = "S⁻¹") -> Gaussian:
    """The block of natural parameters (Λ, η): S = Λ⁻¹ by a Cholesky factor of Λ (escalating jitter,
    an error naming ``what`` if Λ is not positive definite), m = S η."""
    if Lam.dim() == eta.dim():
        S = 1.0 / Lam
        return Gaussian(Lam, eta, S * eta, S)
    S = torch.cholesky_inverse(cholesky(Lam, what=what))
    return Gaussian(Lam, eta, (S @ eta[..., None])[..., 0], S)


def mean(Lam: torch.Tensor, eta: torch.Tensor, what: str = "S⁻¹") -> torch.Tensor:
    """m = Λ⁻¹ η alone (one Cholesky solve, no inverse)."""
    return torch.cholesky_solve(eta[..., None], cholesky(Lam, what=what))[..., 0]


def convex(eta, target, rho: float):
    """η ← (1 − ρ) η + ρ η̂ for every field of ``eta`` and ``target`` (tuples of tensors in natural
    coordinates, or any affine map of them): the natural-gradient step of size ρ towards the optimum
    η̂ given the batch (Hoffman et al. 2013, Eq. 32), for a Gaussian block (:func:`natural_params`) and
    for BayesSCDC's conjugate globals (:func:`crowdzoo.models.scdc.bayes.natgrad_step`) alike."""
    out = [(1 - rho) * e + rho * t for e, t in zip(eta, target)]
    return type(eta)._make(out) if hasattr(eta, "_make") else tuple(out)


def natural_params(q: Gaussian, prior_prec, Lam_lik, eta_lik, rho: float):
    """(Λ, η) after a step of size ρ towards E[s] K⁻¹ + Λ_lik, η_lik (module docstring, :func:`convex`);
    ``Lam_lik`` and ``eta_lik`` already scaled by π_i. A full step (ρ = 1) drops the old parameters."""
    if rho == 1.0:
        Lam, eta = prior_prec + Lam_lik, eta_lik
    else:
        Lam, eta = convex((q.Lam, q.eta), (prior_prec + Lam_lik, eta_lik), rho)
    return (Lam if q.diagonal else sym(Lam)), eta


def step(q: Gaussian, prior_prec, Lam_lik, eta_lik, rho: float, what: str = "S⁻¹") -> Gaussian:
    """The natural-gradient step of size ρ (module docstring), with the new block's moments."""
    return gaussian(*natural_params(q, prior_prec, Lam_lik, eta_lik, rho), what)


def logdet_cov(q: Gaussian, what: str = "S⁻¹") -> torch.Tensor:
    """ln|S| (batched)."""
    if q.diagonal:
        return q.S.log().sum(-1)
    return -logdet_from_chol(cholesky(q.Lam, what=what))


def second(q: Gaussian, K_inv) -> torch.Tensor:
    """tr(K⁻¹ E[x xᵀ]) = tr(K⁻¹ (S + m mᵀ)) (``K_inv`` None: K = I); what q(s) of Eq. 15 reads."""
    return second_moment(K_inv, q.m, q.S)


def kl(q: Gaussian, K_inv, logdet_K, Es, Elog_s, what: str = "S⁻¹") -> torch.Tensor:
    """E_q[ln q(x)] − E_q(x)q(s)[ln p(x | s)] for the prior N(0, K/s) (``K_inv`` None: K = I), batched
    over the block's leading dimensions: the Gaussian terms of Eq. 30–31."""
    return kl_gaussian(second(q, K_inv), q.m.shape[-1], logdet_K, logdet_cov(q, what), Es, Elog_s)
