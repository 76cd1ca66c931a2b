"""An item-level residual beside a sparse GP: each item's own utility that its features do not explain.

With M inducing items among N ≫ M, the sparse conditional f_i | f_m ~ N(A_i f_m, c_i / s) (Eq. 19 of
Simpson & Gurevych 2020) leaves what is particular to item i in the noise c_i / s, which no label can
move: a GP over 16 features with 200 inducing items cannot carry 3,000 items' own utilities, and at
hundreds of labels per item per-item counting beats it. The residual gives each item back a utility
of its own,

    f_i = g(x_i) + r_i,      r_i ~ N(0, 1/s_r),      s_r ~ Gamma(α_r, β_r),

so that a pair's difference gains r_a − r_b. The GP part g still pools items by their features (and
predicts new items, whose residual is the prior's, N(0, 1/E[s_r])); the residual takes what is
left. With every item inducing (an exact GP) the residual would only repeat the GP's own freedom, so
models switch it on where their item side is sparse (``item_residual="auto"``).

Natural-gradient SVI keeps q(r) = Π_i N(m_i, S_i) diagonal (a :class:`~crowdzoo.gp.natural.Gaussian`
block whose Λ has η's shape) and q(s_r) = Gamma, updated like every other factor of the natural-gradient
routes (Eq. 17–18 and 15; for crowdGPPL Eq. 32–37): with per-label weights λ_p and ν_p from the
likelihood, item i collects the labels it is in as a (κ = +1) or b (κ = −1),

    Λ_i ← (1 − ρ) Λ_i + ρ (E[s_r] + π Σ_p λ_p),      η_i ← (1 − ρ) η_i + ρ π Σ_p ν_p,

with ``"exact"`` weights λ = −2 g_v, ν = κ g_μ − 2 g_v m_i and ``"linearised"`` ones (Eq. 9–11)
λ = G² / Q, ν = κ G / Q (y − Φ(ẑ) + κ G m_i). All items step at once from the same labels although a
label couples its two items (a Jacobi step on a system made diagonally dominant by the prior E[s_r]);
ρ is therefore held at or below :data:`RHO_MAX`, which makes it a damped Jacobi step that cannot
oscillate. The cost is O(P_i + N) a step, and the state O(N).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from . import natural
from .conjugate import gamma_moments, kl_gamma, q_s
from .linalg import DTYPE
from .natural import Gaussian

#: the largest step size of the residual's block (a damped Jacobi step; module docstring)
RHO_MAX = 0.5


class Residual(NamedTuple):
    """q(r) (diagonal over the N items) and q(s_r) = Gamma(``shape``, ``rate``)."""

    q: Gaussian
    shape: torch.Tensor
    rate: torch.Tensor

    @property
    def Es(self) -> torch.Tensor:
        return self.shape / self.rate


def init(n_items: int, alpha0: float, beta0: float, init_var: float = 1.0) -> Residual:
    """q(r) at zero means with ``init_var`` times the prior's variance, q(s_r) at the prior."""
    Es0 = alpha0 / beta0
    Lam = torch.full((n_items,), Es0 / init_var, dtype=DTYPE)
    return Residual(natural.gaussian(Lam, torch.zeros(n_items, dtype=DTYPE)),
                    torch.tensor(float(alpha0), dtype=DTYPE), torch.tensor(float(beta0), dtype=DTYPE))


def pair_moments(res: Residual | None, a: torch.Tensor, b: torch.Tensor):
    """Mean and variance of r_a − r_b under q (zeros without a residual)."""
    if res is None:
        return 0.0, 0.0
    m, S = res.q.m, res.q.S
    return m[a] - m[b], S[a] + S[b]


def exact_weights(g_mu, g_v, res: Residual, a, b):
    """(λ, ν_a, ν_b) of the exact likelihood's natural gradient for the two items of each label: g_μ, g_v
    the derivatives of the label's expected log-likelihood in the mean and variance of z_p."""
    h = -2.0 * g_v
    m = res.q.m
    return h, g_mu + h * m[a], -g_mu + h * m[b]


def linearised_weights(mu, Q, y, res: Residual, a, b):
    """(λ, ν_a, ν_b) of the linearised likelihood (Eq. 9–11) about ẑ = ``mu``, with G = φ(ẑ) and noise Q."""
    G = torch.exp(-0.5 * mu * mu) / math.sqrt(2 * math.pi)
    Phi = torch.special.ndtr(mu)
    m = res.q.m
    return G * G / Q, G / Q * (y - Phi + G * m[a]), -G / Q * (y - Phi - G * m[b])


def step(res: Residual, a, b, lam, nu_a, nu_b, rho: float, pi: float, alpha0: float, beta0: float,
         reduce=None) -> Residual:
    """One natural-gradient step of q(r) from the labels (a, b) with weights (λ, ν_a, ν_b) scaled by π,
    step size min(ρ, :data:`RHO_MAX`), then q(s_r) by Eq. 15. ``reduce`` sums the labels' statistics over
    the ranks of a distributed fit."""
    lam_sum, nu_sum = item_sums(res, a, b, lam, nu_a, nu_b)
    if reduce is not None:
        lam_sum, nu_sum = reduce(lam_sum, nu_sum)
    return step_from_sums(res, lam_sum, nu_sum, rho, pi, alpha0, beta0)


def item_sums(res: Residual, a, b, lam, nu_a, nu_b):
    """Each item's Σ_p λ_p and Σ_p ν_p over the labels (a, b) it is in (N,) each."""
    N = res.q.m.shape[0]
    lam_sum = torch.zeros(N, dtype=DTYPE).index_add_(0, a, lam).index_add_(0, b, lam)
    nu_sum = torch.zeros(N, dtype=DTYPE).index_add_(0, a, nu_a).index_add_(0, b, nu_b)
    return lam_sum, nu_sum


def step_from_sums(res: Residual, lam_sum, nu_sum, rho: float, pi: float, alpha0: float,
                   beta0: float) -> Residual:
    """:func:`step` from the items' sums of λ and ν (:func:`item_sums`)."""
    N = res.q.m.shape[0]
    q = natural.step(res.q, res.Es.expand(N), pi * lam_sum, pi * nu_sum, min(float(rho), RHO_MAX))
    shape, rate = q_s(alpha0, beta0, N, natural.second(q, None))
    return Residual(q, shape, rate)


def item_step(res: Residual, items, lam, nu, rho: float, pi: float, alpha0: float, beta0: float) -> Residual:
    """:func:`step` from per-item weights: each entry of ``items`` adds its λ and ν to that item's sums
    (the members of a choice among k items)."""
    N = res.q.m.shape[0]
    lam_sum = torch.zeros(N, dtype=DTYPE).index_add_(0, items, lam)
    nu_sum = torch.zeros(N, dtype=DTYPE).index_add_(0, items, nu)
    q = natural.step(res.q, res.Es.expand(N), pi * lam_sum, pi * nu_sum, min(float(rho), RHO_MAX))
    shape, rate = q_s(alpha0, beta0, N, natural.second(q, None))
    return Residual(q, shape, rate)


def kl(res: Residual, alpha0: float, beta0: float) -> torch.Tensor:
    """KL(q(r) q(s_r) ‖ p(r | s_r) p(s_r)): the residual's terms of the bound (Eq. 30–31)."""
    Es, Elog_s = gamma_moments(res.shape, res.rate)
    return natural.kl(res.q, None, 0.0, Es, Elog_s) + kl_gamma(res.shape, res.rate, alpha0, beta0)


def default_prior() -> tuple[float, float]:
    """(α_r, β_r) = (2, ½): E[1/s_r] = ½, a residual sd of about 0.7 probit units a priori, half the
    variance of GPPL's Gamma(2, 2) prior on the GP part. On simulated crowds (docs/benchmarks.md, "The item
    residual beside a sparse GP": ``python benchmarks/bench_residual.py``) the residual gained 0.11–0.16
    nats of held-out log loss where items had effects of their own and cost 0.001–0.006 where they had
    none; rates ¼ and 1 came within 0.003 of ½ on every crowd there.
    """
    return 2.0, 0.5


def resolve(setting, sparse: bool, what: str = "item_residual") -> bool:
    """Whether a model has the residual: ``True``/``False``, or ``"auto"`` — where its item side is
    sparse (fewer inducing items than items)."""
    from ..errors import DataError

    if setting == "auto":
        return bool(sparse)
    if isinstance(setting, bool):
        return setting
    raise DataError(f"{what}: expected True, False or 'auto', got {setting!r}", arg=what)


def prior_gamma(shape: float, rate: float):
    """The Gamma(α_r, β_r) prior on s_r as a Pyro distribution (what the svi and nuts programs sample)."""
    import pyro.distributions as dist

    return dist.Gamma(torch.tensor(float(shape), dtype=DTYPE), torch.tensor(float(rate), dtype=DTYPE))



def predictive_items(mu, var, r_means, r_vars, s_r, new: bool):
    """Items' (mean, variance) (G, n) per posterior component with the residual added: its q (``r_means``,
    ``r_vars`` (G, N); ``r_vars`` None for draws) at the training items, or for ``new`` items the prior
    N(0, 1/s_r) (``s_r`` (G,)); unchanged without a residual (``r_means`` None)."""
    if r_means is None:
        return mu, var
    if new:
        return mu, var + 1.0 / s_r[:, None]
    return mu + r_means, var if r_vars is None else var + r_vars


def predictive_pairs(mu, var, a, b, r_means, r_vars, s_r, new: bool):
    """(mean, variance) (G, P) of f_a − f_b per component with r_a − r_b added (as
    :func:`predictive_items`)."""
    if r_means is None:
        return mu, var
    if new:
        return mu, var + 2.0 / s_r[:, None]
    mu = mu + r_means[:, a] - r_means[:, b]
    return mu, var if r_vars is None else var + r_vars[:, a] + r_vars[:, b]


def draws(f, comp, r_means, r_vars, g: torch.Generator):
    """Draws f (n, N) of the items' utilities plus the residual's draws from the same components ``comp``."""
    if r_means is None:
        return f
    f = f + r_means[comp]
    if r_vars is not None:
        f = f + torch.randn(f.shape, dtype=DTYPE, generator=g) * r_vars[comp].sqrt()
    return f


def choice_step(res: Residual, items, mask, g_mu, g_cov, rho: float, pi: float, alpha0: float,
                beta0: float) -> Residual:
    """:func:`item_step` from choice rows (:func:`crowdzoo.gp.choice.expected_row_log_lik`'s derivatives
    g (R, K) and G (R, K, K) in the members' mean and covariance; ``items`` (R, K), ``mask`` the slots
    that hold one): each member j of q(r)'s diagonal takes λ_j = −2 G_jj, ν_j = g_j + λ_j m_j (the
    exact weights above, a pair's for a row of two)."""
    lam = -2.0 * torch.diagonal(g_cov, dim1=-2, dim2=-1)
    nu = g_mu + lam * res.q.m[items]
    keep = mask.reshape(-1)
    return item_step(res, items.reshape(-1)[keep], lam.reshape(-1)[keep], nu.reshape(-1)[keep], rho, pi,
                     alpha0, beta0)
