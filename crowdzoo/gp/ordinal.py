"""Ties as a third outcome: the ordinal probit (and logit) of a pair, its Gaussian expectation and its
predictive probabilities.

A label of a pair has three outcomes, coded y ∈ {0, ½, 1} (b ≻ a, a tie, a ≻ b). With the zoo's
convention p(a ≻ b | f) = Φ(Δ), Δ = f_a − f_b (Simpson & Gurevych 2020, Eq. 2 with σ² = ½,
:mod:`crowdzoo.gp.probit`), a threshold τ ≥ 0 on the noisy difference Δ + ε, ε ~ N(0, 1), gives

    P(a ≻ b | Δ, τ) = Φ(Δ − τ)
    P(b ≻ a | Δ, τ) = Φ(−Δ − τ)
    P(tie   | Δ, τ) = Φ(τ − Δ) − Φ(−τ − Δ)

(the ordered probit of Glenn & David 1960; with the logistic F instead of Φ, Rao & Kupper 1967).
At τ = 0 a tie has probability 0 and the two others are the pairwise probit exactly. Integrating
Δ ~ N(μ, v) gives the closed form of :func:`predictive_outcomes` (the same identity as Eq. 3).

The outcomes are coded as the category k = 2y ∈ {0, 1, 2} of a ``Categorical`` whose logits are
:func:`outcome_log_probs`, so that Pyro's svi, nuts and map engines and ArviZ's per-row
log-likelihood take them without a distribution of their own.
"""
from __future__ import annotations

import math

import pyro.distributions as dist
import torch
from torch.nn.functional import logsigmoid
from torch.special import log_ndtr

from .probit import fast_log_ndtr, gauss_hermite, predictive_prob, safe_sqrt

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)

#: the default prior of τ (probit scale): LogNormal(log ½, 1). Its median ½ makes a tie of two equal
#: items 38 % likely (2Φ(½) − 1), its 95 % interval (0.07, 3.5) runs from ties of 6 % to nearly
#: all ties; on the unconstrained log τ that nuts and svi see it is a unit Normal, and it keeps τ
#: off 0, where an observed tie has probability 0.
TIE_PRIOR_LOC, TIE_PRIOR_SCALE = math.log(0.5), 1.0


def default_tie_prior() -> dist.Distribution:
    """LogNormal(log ½, 1) over τ (module constants :data:`TIE_PRIOR_LOC`, :data:`TIE_PRIOR_SCALE`)."""
    return dist.LogNormal(torch.tensor(TIE_PRIOR_LOC, dtype=torch.float64),
                          torch.tensor(TIE_PRIOR_SCALE, dtype=torch.float64))


def outcome_codes(y: torch.Tensor) -> torch.Tensor:
    """The category k = 2y ∈ {0, 1, 2} (b ≻ a, tie, a ≻ b) of labels y ∈ {0, ½, 1}."""
    return torch.round(2.0 * torch.as_tensor(y)).long()


def _log1mexp(x: torch.Tensor) -> torch.Tensor:
    """log(1 − eˣ) for x ≤ 0, accurate on both sides of −log 2 (Mächler 2012)."""
    cut = -math.log(2.0)  # each branch sees only its own side, so that neither sends NaN gradients
    x = x.clamp_max(0.0)
    near = torch.log(-torch.expm1(x.clamp_min(cut)))
    return torch.where(x > cut, near, torch.log1p(-torch.exp(x.clamp_max(cut))))


def log_interval(upper: torch.Tensor, lower: torch.Tensor, log_cdf=log_ndtr) -> torch.Tensor:
    """log(F(upper) − F(lower)) for upper ≥ lower and a symmetric F (F(−x) = 1 − F(x)), stable in
    both tails: an interval above 0 is reflected below it, where log F keeps its precision, and the
    difference is log F(u) + log(1 − F(l)/F(u))."""
    flip = upper + lower > 0
    u = torch.where(flip, -lower, upper)
    lo = torch.where(flip, -upper, lower)
    log_u = log_cdf(u)
    return log_u + _log1mexp(log_cdf(lo) - log_u)


def outcome_log_probs(delta: torch.Tensor, tau, link: str = "probit") -> torch.Tensor:
    """log P of (b ≻ a, tie, a ≻ b) given Δ = f_a − f_b and τ ≥ 0: shape Δ.shape + (3,).

    ``link``: "probit" (F = Φ, the zoo's convention) or "logit" (F = the logistic σ, Rao & Kupper 1967).
    At τ = 0 the first and last are log F(∓Δ), the pairwise likelihood exactly, and the middle is −∞."""
    log_cdf = log_ndtr if link == "probit" else logsigmoid
    tau = torch.as_tensor(tau, dtype=delta.dtype)
    return torch.stack([log_cdf(-delta - tau), log_interval(tau - delta, -tau - delta, log_cdf),
                        log_cdf(delta - tau)], -1)


def outcome_distribution(delta: torch.Tensor, tau, link: str = "probit") -> dist.Categorical:
    """The three outcomes as a ``Categorical`` over k = 2y (:func:`outcome_codes`)."""
    return dist.Categorical(logits=outcome_log_probs(delta, tau, link))


def predictive_outcomes(mean: torch.Tensor, var: torch.Tensor, tau, link: str = "probit") -> torch.Tensor:
    """(p_a, p_tie, p_b) for Δ ~ N(μ, v): P(a ≻ b) = Φ((μ − τ)/√(1 + v)), P(b ≻ a) = Φ((−μ − τ)/√(1 + v)),
    the tie the rest; shape μ.shape + (3,). The logit link is for a point Δ alone (v = 0)."""
    tau = torch.as_tensor(tau, dtype=mean.dtype)
    if link == "probit":  # Eq. 3 at the shifted means ±μ − τ
        p_a, p_b = predictive_prob(mean - tau, var), predictive_prob(-mean - tau, var)
    else:
        if bool((torch.as_tensor(var) > 0).any()):
            raise ValueError("predictive_outcomes: the logit link has no closed form under a Gaussian Δ")
        p_a, p_b = torch.sigmoid(mean - tau), torch.sigmoid(-mean - tau)
    return torch.stack([p_a, (1.0 - p_a - p_b).clamp_min(0.0), p_b], -1)


def sample_outcomes(delta: torch.Tensor, tau, link: str, gen: torch.Generator) -> torch.Tensor:
    """Replicated labels y ∈ {0, ½, 1} drawn from the outcomes' probabilities at Δ."""
    p = outcome_log_probs(delta, tau, link).exp()
    r = torch.rand(delta.shape, generator=gen, dtype=delta.dtype)
    return 0.5 * ((r > p[..., 0]).double() + (r > p[..., 0] + p[..., 1]).double())


def _ratio(log_num: torch.Tensor, log_den: torch.Tensor) -> torch.Tensor:
    return torch.exp(log_num - log_den)


def outcome_derivatives(y: torch.Tensor, delta: torch.Tensor, tau: torch.Tensor):
    """log p(y | Δ, τ) of the ordinal probit and its derivatives (g, g_Δ, g_ΔΔ, g_τ, g_ττ), each shaped
    like Δ (``y`` broadcasts against it).

    Decided labels (y = 1: z = Δ − τ; y = 0: z = −Δ − τ) with r = φ(z)/Φ(z): g = log Φ(z),
    g_Δ = ±r, g_τ = −r, g_ΔΔ = g_ττ = −r(z + r). A tie, with u = τ − Δ, l = −τ − Δ, D = Φ(u) − Φ(l),
    α = φ(u)/D, γ = φ(l)/D: g = log D, g_Δ = γ − α, g_τ = α + γ, g_ΔΔ = lγ − uα − g_Δ²,
    g_ττ = lγ − uα − g_τ²."""
    sgn = 2.0 * y - 1.0  # ±1 decided, 0 a tie
    tie = sgn == 0
    z = sgn * delta - tau
    logphi = fast_log_ndtr(z)
    r = _ratio(-0.5 * z * z - _LOG_SQRT_2PI, logphi)
    g2 = -r * (z + r)
    g, g_d, g_dd, g_t, g_tt = logphi, sgn * r, g2, -r, g2
    if bool(tie.any()):  # the ties' terms on the tie entries alone (a third of the work at a third ties)
        tie = tie.expand(z.shape)
        d_t = torch.as_tensor(delta).expand(z.shape)[tie]
        tau_t = torch.as_tensor(tau, dtype=z.dtype).expand(z.shape)[tie]
        u, lo = tau_t - d_t, -tau_t - d_t
        log_d = log_interval(u, lo, fast_log_ndtr)
        alpha = _ratio(-0.5 * u * u - _LOG_SQRT_2PI, log_d)
        gamma = _ratio(-0.5 * lo * lo - _LOG_SQRT_2PI, log_d)
        t_d, t_t = gamma - alpha, alpha + gamma
        curv = lo * gamma - u * alpha

        def put(value, decided):
            return torch.where(tie, torch.zeros_like(decided).masked_scatter(tie, value), decided)

        g, g_d, g_dd = put(log_d, g), put(t_d, g_d), put(curv - t_d * t_d, g_dd)
        g_t, g_tt = put(t_t, g_t), put(curv - t_t * t_t, g_tt)
    return g, g_d, g_dd, g_t, g_tt


def initial_tau(share_of_ties: torch.Tensor) -> torch.Tensor:
    """τ at which a tie of two equal utilities is as common as ties are among the labels:
    2Φ(τ) − 1 = their share (clipped to [0.02, 0.98]); natgrad's starting point."""
    share = torch.as_tensor(share_of_ties, dtype=torch.float64).clamp(0.02, 0.98)
    return torch.special.ndtri((1.0 + share) / 2.0)


def threshold_step(tau, y, mu, var, scale, prior, steps: int = 3, n: int = 20, reduce=None,
                   rate: float = 1.0):
    """τ after ``steps`` Newton steps on θ = log τ up scale · Σ E[log p(y | Δ, τ)] + log p(θ), Δ ~ N(μ, v)
    per label, p(θ) the density of log τ under ``prior`` (natgrad's point estimate: the mode of log τ,
    as the generic map engine finds it). The likelihood is concave in τ; a step where the whole
    objective does not curve down is a gradient step, and each step is clipped to ±½ and times
    ``rate`` (ρ_i on a mini-batch, so that τ settles as q does). ``reduce`` sums the labels' terms
    over the ranks of a distributed fit. ``scale``: a number, or one per label (π_i times each label's
    weight)."""
    for _ in range(steps):
        _, _, _, g_t, g_tt = expected_log_outcome(y, mu, var, tau, n)
        d1, d2 = _scaled_sum(scale, g_t), _scaled_sum(scale, g_tt)
        if reduce is not None:
            d1, d2 = reduce(d1, d2)
        theta = tau.log().detach().requires_grad_(True)
        log_prior = prior.log_prob(theta.exp()) + theta  # the density of log τ
        p1, = torch.autograd.grad(log_prior, theta, create_graph=True)
        p2, = torch.autograd.grad(p1, theta)
        grad = tau * d1 + p1.detach()
        curv = tau * tau * d2 + tau * d1 + p2
        step = -grad / curv if curv < 0 else 0.1 * grad
        tau = tau * torch.exp(rate * step.clamp(-0.5, 0.5))
    return tau.detach()


def _scaled_sum(scale, x):
    """scale · Σ x for a number ``scale``, Σ scale_p x_p for one per label."""
    return (scale * x).sum() if torch.is_tensor(scale) and scale.dim() else scale * x.sum()


def threshold_step_groups(tau, groups, y, mu, var, scale, prior, steps: int = 3, n: int = 20, reduce=None,
                          rate: float = 1.0):
    """:func:`threshold_step` for a threshold per group (per user): ``tau`` (U,), ``groups`` (P,) each
    label's group; each τ_u climbs its own labels' expected log-likelihood plus the log density of
    log τ_u under ``prior`` (the same prior for every group, independently), all groups at once. A group
    without labels in the batch moves to its prior's mode of log τ. ``scale``: a number, or one per
    label."""
    U = tau.shape[0]
    per_label = torch.is_tensor(scale) and bool(scale.dim())
    for _ in range(steps):
        _, _, _, g_t, g_tt = expected_log_outcome(y, mu, var, tau[groups], n)
        if per_label:
            g_t, g_tt = scale * g_t, scale * g_tt
        d1 = (1.0 if per_label else scale) * torch.zeros(U, dtype=tau.dtype).index_add_(0, groups, g_t)
        d2 = (1.0 if per_label else scale) * torch.zeros(U, dtype=tau.dtype).index_add_(0, groups, g_tt)
        if reduce is not None:
            d1, d2 = reduce(d1, d2)
        theta = tau.log().detach().requires_grad_(True)
        log_prior = (prior.log_prob(theta.exp()) + theta).sum()  # iid: the derivatives are elementwise
        p1, = torch.autograd.grad(log_prior, theta, create_graph=True)
        p2, = torch.autograd.grad(p1.sum(), theta)
        grad = tau * d1 + p1.detach()
        curv = tau * tau * d2 + tau * d1 + p2
        step = torch.where(curv < 0, -grad / curv.clamp_max(-1e-12), 0.1 * grad)
        tau = tau * torch.exp(rate * step.clamp(-0.5, 0.5))
    return tau.detach()


def expected_log_outcome(y: torch.Tensor, mu: torch.Tensor, var: torch.Tensor, tau, n: int = 20):
    """E[log p(y | Δ, τ)] for Δ ~ N(μ, v) by Gauss–Hermite quadrature of each label's 1-D marginal
    (as :func:`~crowdzoo.gp.probit.expected_log_probit`, which it equals for decided labels at τ = 0),
    with its derivatives: (ell, dμ, dv, dτ, dττ), each shaped like μ; dE/dμ = E[g_Δ],
    dE/dv = ½ E[g_ΔΔ], dE/dτ = E[g_τ], d²E/dτ² = E[g_ττ]."""
    x, w = gauss_hermite(n)
    tau = torch.as_tensor(tau, dtype=mu.dtype)
    if tau.dim():  # a threshold per label (per user's labels)
        tau = tau[..., None]
    delta = mu[..., None] + safe_sqrt(var)[..., None] * x
    g, g_d, g_dd, g_t, g_tt = outcome_derivatives(y.to(mu.dtype)[..., None], delta, tau)
    return g @ w, g_d @ w, 0.5 * (g_dd @ w), g_t @ w, g_tt @ w
