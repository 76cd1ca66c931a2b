"""The paper's stochastic variational inference for GPPL (Simpson & Gurevych 2020, Alg. 1): the
step and bound that :mod:`crowdzoo.inference.natgrad`'s loop runs.

q(f_m, s) = q(f_m) q(s) with q(f_m) = N(m, S) over the M inducing utilities (Eq. 12–14) and
q(s) = Gamma(α, β) (Eq. 15). Each iteration takes a natural-gradient step of size ρ_i on the
natural parameters (S⁻¹, S⁻¹m) from a mini-batch scaled by π_i = P / P_i (Eq. 17–18); q(s) is then
updated in closed form (Eq. 15). Only O(M²) numbers live between iterations.

Two likelihood treatments, chosen by ``likelihood=``:

``"linearised"`` (the paper): the probit is replaced by a Gaussian with noise Q from a
    beta-Bernoulli moment match (Eq. 7–8) and linearised about the current mean (Eq. 9–11), with
    an inner loop that re-linearises G on the mini-batch (Alg. 1, lines 4–6).
``"exact"`` (beyond the paper): the natural gradient of the exact expected log-likelihood
    E_q[log Φ(y'(f_a − f_b))], computed by Gauss–Hermite quadrature of each pair's 1-D marginal
    (as Hensman et al. 2015 do for GP classification). Same cost per iteration.

Ties (labels y = ½, ``ties="model"``) take the exact likelihood only: the ordinal probit of
:mod:`crowdzoo.gp.ordinal`, whose expectation and its derivatives in the marginal's mean and variance
come from the same Gauss–Hermite nodes (:func:`~crowdzoo.gp.ordinal.expected_log_outcome`). The
threshold τ is a point estimate: after each q step, Newton steps on log τ climb the batch's expected
log-likelihood plus the log density of log τ under ``tie_prior`` (the mode of log τ, as the map
route finds it; a concave problem in τ for the likelihood, Newton's steps damped to ±½ in log τ). On
a mini-batch each step is scaled by ρ_i, a stochastic approximation that settles as q does (full
Newton steps there made τ, and the bound, chase each batch).

The bound of Eq. 30 (its likelihood term by Gauss–Hermite quadrature in both cases) decides
convergence (:class:`~crowdzoo.inference.natgrad.StopRule`). A fit on mini-batches of the exact
likelihood then ends with full-batch sweeps of the item residual alone (:func:`sweep_residual`), or
without the residual a few full-batch steps of every factor (:func:`full_batch_steps`; both beyond the
paper, :func:`finish`): the last mini-batch iterate of a block that each batch sees through a few
labels, such as an item's residual, is a noisy estimate of the full-batch optimum.

Weights (``PairwiseData.weights``): a label of weight w counts as w copies of it: its likelihood's
statistics (the exact likelihood's derivatives, the linearised one's precision G²/Q, i.e. noise Q/w)
and its term of the bound are multiplied by w, and so is its pull on τ; mini-batches stay uniform over
labels with π_i = P / P_i, an unbiased estimate of the weighted sums, and τ starts at the weighted share
of ties.

The algorithm is module-level and pure (BlackJAX style): :func:`init` (q at the prior), :func:`step`
(one iteration on a :class:`~crowdzoo.inference.natgrad.Batch`: a :class:`State` and an :class:`Info`)
and :func:`bound`, each on a :class:`Problem` that holds what the fit keeps fixed; :func:`fit_natgrad`
assembles the problem, hands the three to the loop of :mod:`crowdzoo.inference.natgrad` with one
:class:`~crowdzoo.inference.natgrad.Settings`, and builds the posterior.

The order effect (``GPPL(order_effect=True)``, beyond the paper): q(δ) of the first item's advantage is
one more Gaussian factor, one-dimensional, whose row in z is 1 for every label
(:mod:`crowdzoo.gp.order`): after q(f_m) and q(r) each iteration, a natural-gradient step of the same
size ρ_i from the batch's label weights (λ, ν) of the same likelihood, with prior precision 1/σ_δ²;
its mean and variance add to every label's marginal of z (mean field: q(f_m, r, δ) = q(f_m) q(r) q(δ)),
and its KL to N(μ_δ, σ_δ²) enters the bound.

Learned length-scales (beyond the paper, which fixes ℓ by the median heuristic and names learning it
as future work, §6; the default wherever the model leaves ℓ to the median heuristic on items with
features and each step takes every label, ``learn_kernel=False`` keeps the paper's kernel): after
each natural-gradient step the log length-scales (ARD), and with ``learn_inducing=True`` the inducing
inputs Z, take one Adam step up the same mini-batch bound with q held fixed
(:mod:`crowdzoo.inference.hyper`; Hensman et al. 2013, Salimbeni et al. 2018). They start at the median
heuristic rescaled so that the median pair of items is at distance 1
(:func:`~crowdzoo.gp.kernels.learning_start`; in many dimensions the heuristic itself puts items so far
apart that the kernel and the bound's gradient in ℓ vanish); the learned values are in the posterior's
model and settings.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch.special import ndtr

from ...data.tensors import label_tensors, weight_tensor
from ...errors import DataError, NumericalError
from ...gp import natural, order, residual
from ...gp.conjugate import gamma_moments, kl_gamma, q_s, require_gamma, scale_rate
from ...gp.learn import KernelSpace, at_learning_start, learns_by_default, log_prior_of_theta
from ...gp.linalg import DTYPE, cho_solve, logdet_from_chol, sym
from ...gp.natural import Gaussian
from ...gp.ordinal import expected_log_outcome, initial_tau, threshold_step
from ...gp.probit import beta_bernoulli_Q, expected_log_probit, probit_grads
from ...inference import natgrad as loop
from ...inference.distributed import Shard, shard
from ...inference.hyper import Adam, adam_init, ascend, default_batch_size, rho_floor, state_gain
from .posterior import GPPLPosterior

WHAT = "S⁻¹ (natural-gradient precision)"

#: the stop rule's tolerance while the kernel learns (``fit_natgrad``'s ``tol`` unset; 1e-4 otherwise)
LEARNING_TOL = 3e-4


class Basis(NamedTuple):
    """The coordinates q lives in, at one θ: f_m itself (K = K_mm, pair rows A_a − A_b) or, when the
    kernel is learned, the whitened u = L_mm⁻¹ f_m (K = I, pair rows L_mm⁻¹(k_m(a) − k_m(b))), in which
    q(u) stays put while θ moves and S⁻¹ ⪰ E[s] I stays well conditioned. The natural-gradient step
    is the same step in either: the two are linear images of each other."""

    setup: object
    K_inv: torch.Tensor
    logdet_K: torch.Tensor
    whitened: bool

    def rows(self, a, b):
        """The pair rows (:class:`~crowdzoo.gp.conditional.PairRows`) and c of pairs (a, b)."""
        return self.setup.pair_factors(a, b, self.whitened)

    def to_f(self, m, S):
        """q(f_m)'s mean and covariance from this basis's."""
        if not self.whitened:
            return m, S
        L = self.setup.L_mm
        return L @ m, sym(L @ S @ L.T)


def basis_of(setup, whitened: bool = False) -> Basis:
    if whitened:
        return Basis(setup, torch.eye(setup.M, dtype=DTYPE), torch.zeros((), dtype=DTYPE), True)
    return Basis(setup, cho_solve(setup.L_mm, torch.eye(setup.M, dtype=DTYPE)), logdet_from_chol(setup.L_mm),
                 False)


class Problem(NamedTuple):
    """What a GPPL fit holds fixed: this rank's labels (a, b, y; ``w`` their weights, None: all 1), the
    Gamma prior (α₀, β₀) of s, the
    basis at the model's kernel, the kernel's space when θ learns (``space``, ``log_prior`` its prior
    term, ``kernel_lr`` Adam's step) and the route's options."""

    a: torch.Tensor
    b: torch.Tensor
    y: torch.Tensor
    shard: Shard
    alpha0: float
    beta0: float
    basis: Basis
    likelihood: str = "linearised"
    inner_iter: int = 3
    n_gh: int = 20
    space: KernelSpace | None = None
    log_prior: Callable | None = None
    kernel_lr: float = 0.3
    every: tuple | None = None  # the pair rows and c of all this rank's labels, when θ is fixed
    tie_prior: object = None  # the prior of τ when the labels have ties (a third outcome), else None
    tie_steps: int = 3  # Newton steps on log τ per iteration
    residual: tuple | None = None  # the Gamma prior (α_r, β_r) of the item residual's s_r, or None
    w: torch.Tensor | None = None  # this rank's labels' weights, or None: every label 1
    order_prior: tuple | None = None  # (μ_δ, σ_δ²) of the order effect δ, or None: no order effect

    def weights(self, idx):
        """The weights of this rank's labels ``idx``, or None where every label weighs 1."""
        return None if self.w is None else self.w[idx]

    def pairs(self, idx):
        """The items (a, b) of this rank's labels ``idx``."""
        return self.a[idx], self.b[idx]

    def rows(self, basis: Basis, idx):
        """The pair rows and c of this rank's labels ``idx`` in ``basis`` (the problem's own for every
        label, when it holds them)."""
        if self.every is not None and loop.is_every(idx, self.a.shape[0]):
            return self.every
        return basis.rows(self.a[idx], self.b[idx])


class State(NamedTuple):
    """Between iterations: q(f_m) (q(u) in the whitened basis when θ learns), the Gamma q(s) (shape
    α, rate β), θ = (log ℓ, Z) with its Adam moments when they learn, and the basis at that θ."""

    q: Gaussian
    shape: torch.Tensor
    rate: torch.Tensor
    hyper: Adam | None = None
    basis: Basis | None = None  # None: the problem's (θ fixed)
    tau: torch.Tensor | None = None  # the tie threshold, when the labels have ties
    r: residual.Residual | None = None  # q(r) and q(s_r) of the item residual, when the model has one
    delta: order.Order | None = None  # q(δ) of the order effect, when the model has one


class Info(NamedTuple):
    """What a step did: its step size ρ_i and E[s] after it."""

    rho: float
    s: torch.Tensor


def _basis(state: State, problem: Problem) -> Basis:
    return problem.basis if state.basis is None else state.basis


def _marginals(rows, c, m, S, Es, r=None, ab=None, delta=None):
    """Mean and variance of z_p = f_a − f_b (+ δ) under q (Eq. 14 with the E[s] of Eq. 15); ``rows`` a
    :class:`~crowdzoo.gp.conditional.PairRows`; with the item residual's q ``r`` the pairs ``ab``' r_a − r_b
    added, with q(δ) ``delta`` the order effect's mean and variance."""
    dm, dv = _offset(r, ab, delta)
    return rows.mean(m) + dm, c / Es + rows.quad(S) + dv


def _offset(r, ab, delta):
    """Mean and variance of the part of z_p beside the GP: r_a − r_b of the item residual and δ of the
    order effect (each 0 where the model has none)."""
    dm, dv = residual.pair_moments(r, *ab) if r is not None else (0.0, 0.0)
    if delta is not None:
        dm, dv = dm + delta.m, dv + delta.S
    return dm, dv


def _expected(p: Problem, tau, y, mu, v, w=None):
    """E_q[log p(y | Δ)] and its derivatives in μ and v per label: the probit's, or with ties the
    ordinal probit's at threshold ``tau``; each times the label's weight ``w`` where given."""
    if tau is None:
        out = expected_log_probit(y, mu, v, p.n_gh)
    else:
        out = expected_log_outcome(y, mu, v, tau, p.n_gh)[:3]
    return out if w is None else tuple(x * w for x in out)


def init(problem: Problem, gen: torch.Generator) -> State:
    """q at the prior, E[s] = α₀/β₀; θ at the model's kernel; τ, with ties, where a tie of two equal
    utilities is as common as the ties are among all labels: 2Φ(τ) − 1 = their share."""
    Es0 = problem.alpha0 / problem.beta0
    q = natural.gaussian(Es0 * problem.basis.K_inv, torch.zeros(problem.basis.setup.M, dtype=DTYPE), WHAT)
    tau = None
    if problem.tie_prior is not None:
        tau = initial_tau(problem.shard.tie_share(problem.y, problem.w))
    r = None if problem.residual is None else residual.init(problem.basis.setup.N, *problem.residual)
    delta = None if problem.order_prior is None else order.init(problem.order_prior)
    return State(q, torch.tensor(problem.alpha0, dtype=DTYPE), torch.tensor(problem.beta0, dtype=DTYPE),
                 None if problem.space is None else adam_init(problem.space.theta0), tau=tau, r=r,
                 delta=delta)


def step(state: State, batch: loop.Batch, problem: Problem) -> tuple[State, Info]:
    """One iteration of Alg. 1 on the labels ``batch.idx``: q(f_m) by a natural-gradient step (Eq.
    17–18), q(s) by Eq. 15, then, when θ learns, one Adam step up the batch's bound with q held."""
    idx = problem.shard.local(batch.idx)
    full = loop.is_every(batch.idx, problem.shard.n_labels)
    state = _q_step(state, _basis(state, problem), idx, batch.rho, batch.pi, problem,
                    1.0 if full else batch.rho)
    if state.hyper is not None:
        state = _kernel_step(state, idx, batch.pi, problem)
    return state, Info(batch.rho, state.shape / state.rate)


def _Q(p: Problem, y, w=None):
    """Q of Eq. 8 from the prior variance of z_p: 2/E₀[s] (f_a, f_b independent), plus 2/E₀[s_r] with
    the item residual and σ_δ² with the order effect; divided by each label's weight ``w`` where given (w
    copies of a Gaussian pseudo-observation are one with noise Q/w)."""
    var_z = 2.0 * p.beta0 / p.alpha0 + (0.0 if p.residual is None else 2.0 * p.residual[1] / p.residual[0])
    if p.order_prior is not None:
        var_z = var_z + p.order_prior[1]
    Q = beta_bernoulli_Q(torch.full_like(y, var_z), y)
    return Q if w is None else Q / w


def _q_step(state: State, basis: Basis, idx, r_i, pi, p: Problem, tau_rate: float = 1.0) -> State:
    K_inv = basis.K_inv
    A_d, c = p.rows(basis, idx)
    yb, wb = p.y[idx], p.weights(idx)
    ab = p.pairs(idx)
    Es = state.shape / state.rate
    q, r, delta = state.q, state.r, state.delta
    offset, r_var = _offset(r, ab, delta)
    if p.likelihood == "linearised":
        q = _linearised_step(q, A_d, yb, Es, _Q(p, yb, wb), K_inv, r_i, pi, p.inner_iter, p.shard.sum, offset)
    else:
        mu_f = A_d.mean(q.m)
        _, g_mu, g_v = _expected(p, state.tau, yb, mu_f + offset, c / Es + A_d.quad(q.S) + r_var, wb)
        Lam_lik, eta_lik = p.shard.sum(-2.0 * pi * A_d.gram(g_v), pi * A_d.tmul(g_mu - 2.0 * g_v * mu_f))
        q = natural.step(q, Es * K_inv, Lam_lik, eta_lik, r_i, WHAT)
    if r is not None:  # q(r) given the new q(f_m): coordinate ascent, as crowdGPPL's factors
        r = _residual_step(r, p, yb, ab, *_marginals(A_d, c, q.m, q.S, Es, r, ab, delta), state.tau, r_i, pi,
                           wb)
    if delta is not None:  # q(δ) given the new q(f_m) and q(r)
        delta = _order_step(delta, p, yb, *_marginals(A_d, c, q.m, q.S, Es, r, ab, delta), state.tau, r_i, pi,
                            wb)
    shape, rate = q_s(p.alpha0, p.beta0, basis.setup.M, natural.second(q, K_inv))  # Eq. 15
    if p.likelihood == "exact" and not basis.setup.exact:  # the likelihood's pull through c / E[s]
        _, _, g_v = _expected(p, state.tau, yb, *_marginals(A_d, c, q.m, q.S, Es, r, ab, delta), wb)
        rate = scale_rate(rate, shape, p.shard.sum(-pi * (g_v * c).sum()))
    tau = state.tau
    if tau is not None:
        mu, v = _marginals(A_d, c, q.m, q.S, shape / rate, r, ab, delta)
        tau = threshold_step(tau, yb, mu, v, pi if wb is None else pi * wb, p.tie_prior, p.tie_steps, p.n_gh,
                             p.shard.sum if p.shard.world > 1 else None, tau_rate)
    return state._replace(q=q, shape=shape, rate=rate, tau=tau, r=r, delta=delta)


def _order_step(delta: order.Order, p: Problem, y, mu, v, tau, r_i, pi, w=None) -> order.Order:
    """One natural-gradient step of q(δ) (:mod:`crowdzoo.gp.order`) at the labels' marginals (μ, v) of z
    under the current q (``w``: the labels' weights, or None)."""
    if p.likelihood == "linearised":
        lam, nu = order.linearised_weights(mu, _Q(p, y, w), y, delta)
    else:
        _, g_mu, g_v = _expected(p, tau, y, mu, v, w)
        lam, nu = order.exact_weights(g_mu, g_v, delta)
    return order.step(delta, *p.shard.sum(lam.sum(), nu.sum()), r_i, pi, p.order_prior)


#: the step size of the full-batch steps that end a mini-batch fit (:func:`full_batch_steps`)
POLISH_RHO = 0.5


def full_batch_steps(state: State, p: Problem, steps: int, chunk: int, rho: float = POLISH_RHO) -> State:
    """``steps`` full-batch natural-gradient steps of size ``rho`` on q(f_m), q(r) and q(s), each from
    the statistics of every label summed over chunks of ``chunk`` labels (memory O(chunk · M), as a
    mini-batch step's), all at the current q: a damped Jacobi step of the exact likelihood's Eq. 17–18
    on the whole data.

    Why: a mini-batch step of size ρ_i scales its batch by π_i = P / P_i, so each natural parameter is
    an exponentially weighted sum over the last ~1/ρ_i batches, drawn with replacement: each label
    counts a Poisson number of times, with mean 1/(ρ_i π_i). For a block that every batch sees through
    a few labels — an item's residual r_i among thousands of items — the iterate's mean then strays by
    about √(ρ_i π_i / 2) of its posterior sd from the full-batch optimum, and since the noise is
    correlated over those ~1/ρ_i iterations, averaging the last iterates does not remove it. Steps on
    every label do."""
    basis = _basis(state, p)
    n = p.a.shape[0]
    for _ in range(steps):
        q, r, delta = state.q, state.r, state.delta
        Es = state.shape / state.rate
        Lam_lik = torch.zeros_like(q.Lam)
        eta_lik = torch.zeros_like(q.eta)
        lam_r = nu_r = None if r is None else torch.zeros_like(r.q.m)
        gvc = torch.zeros((), dtype=DTYPE)
        lam_d = nu_d = torch.zeros((), dtype=DTYPE)
        for lo in range(0, n, chunk):
            idx = torch.arange(lo, min(lo + chunk, n))
            A_d, c = p.rows(basis, idx)
            ab = p.pairs(idx)
            mu_f = A_d.mean(q.m)
            mu, v = _marginals(A_d, c, q.m, q.S, Es, r, ab, delta)
            _, g_mu, g_v = _expected(p, None, p.y[idx], mu, v, p.weights(idx))
            Lam_lik = Lam_lik - 2.0 * A_d.gram(g_v)
            eta_lik = eta_lik + A_d.tmul(g_mu - 2.0 * g_v * mu_f)
            gvc = gvc - (g_v * c).sum()
            if r is not None:
                lam, nu_a, nu_b = residual.exact_weights(g_mu, g_v, r, *ab)
                la, nu = residual.item_sums(r, *ab, lam, nu_a, nu_b)
                lam_r, nu_r = lam_r + la, nu_r + nu
            if delta is not None:
                lam, nu = order.exact_weights(g_mu, g_v, delta)
                lam_d, nu_d = lam_d + lam.sum(), nu_d + nu.sum()
        Lam_lik, eta_lik, gvc = p.shard.sum(Lam_lik, eta_lik, gvc)
        q = natural.step(q, Es * basis.K_inv, Lam_lik, eta_lik, rho, WHAT)
        if r is not None:
            if p.shard.world > 1:
                lam_r, nu_r = p.shard.sum(lam_r, nu_r)
            r = residual.step_from_sums(r, lam_r, nu_r, rho, 1.0, *p.residual)
        if delta is not None:
            delta = order.step(delta, *p.shard.sum(lam_d, nu_d), rho, 1.0, p.order_prior)
        shape, rate = q_s(p.alpha0, p.beta0, basis.setup.M, natural.second(q, basis.K_inv))  # Eq. 15
        if not basis.setup.exact:
            rate = scale_rate(rate, shape, gvc)
        state = state._replace(q=q, shape=shape, rate=rate, r=r, delta=delta)
    return state


def _f_marginals(state: State, p: Problem, chunk: int):
    """Each label's mean and variance of the GP part of f_a − f_b under the current q(f_m) and q(s)
    (Eq. 14: d_pᵀ m and c_p / E[s] + d_pᵀ S d_p), (P,) each: the items' rows once (O(N M²)), then
    O(M) a label in chunks of ``chunk`` labels."""
    basis = _basis(state, p)
    m, S = basis.to_f(state.q.m, state.q.S)
    items = basis.setup.item_moments(m[None], S[None], (state.shape / state.rate).reshape(1))
    n = p.a.shape[0]
    mu, v = torch.empty(n, dtype=DTYPE), torch.empty(n, dtype=DTYPE)
    for lo in range(0, n, chunk):
        sl = slice(lo, min(lo + chunk, n))
        mu_c, v_c = items.pairs(p.a[sl], p.b[sl])
        mu[sl], v[sl] = mu_c[0], v_c[0]
    return mu, v


def sweep_residual(state: State, p: Problem, chunk: int, sweeps: int = 30,
                   tol: float = 1e-3) -> tuple[State, int]:
    """Full-batch steps of q(r) and q(s_r) alone, q(f_m) and q(s) held: each label's GP part of
    f_a − f_b is then a fixed N(μ_p, v_p) (Eq. 14), so a step costs O(P + N), with no (P, M) rows
    after the one pass that computes (μ_p, v_p).

    Each sweep is the exact likelihood's natural-gradient step (Eq. 17–18) on every item's residual at
    once, the diagonal block of :mod:`crowdzoo.gp.residual`: at ρ = 1, Λ_i = E[s_r] + Σ_p λ_p and
    η_i = Σ_p ν_p, a Newton step of each item with the others held (a Jacobi sweep). The labels see only
    differences r_a − r_b, so the bound depends on a common shift of the means only through the prior
    term −½ E[s_r] Σ_i m_i², which is largest at mean zero: each sweep recentres the means there. That
    shift is the one direction the sweeps alone would take hundreds of steps to settle (only the prior
    pulls on it: at 660 labels per item it shrank by under 1 % a sweep); the rest contracts by a
    constant factor per sweep (about .4 at 660 labels per item). Then q(s_r) by Eq. 15. ρ starts at 1
    and drops to :data:`~crowdzoo.gp.residual.RHO_MAX` if a sweep moves the means more than the last one
    did (items compared within a near-bipartite graph can make the undamped sweep oscillate). The
    sweeps stop once no item's mean moved by more than ``tol`` of its posterior sd, or after ``sweeps``.
    Returns the state and the sweeps taken."""
    r = state.r
    mu_f, v_f = _f_marginals(state, p, chunk)
    if state.delta is not None:  # q(δ) held too: the order effect is part of each label's fixed marginal
        mu_f, v_f = mu_f + state.delta.m, v_f + state.delta.S
    sgn = 2.0 * p.y - 1.0
    n, N = p.a.shape[0], r.q.m.shape[0]
    rho, last, done = 1.0, math.inf, 0
    while done < sweeps:
        done += 1
        m, S = r.q.m, r.q.S
        lam_r = torch.zeros_like(m)
        nu_r = torch.zeros_like(m)
        for lo in range(0, n, chunk):
            sl = slice(lo, min(lo + chunk, n))
            a, b = p.a[sl], p.b[sl]
            g_mu, g_v = probit_grads(sgn[sl], mu_f[sl] + m[a] - m[b], v_f[sl] + S[a] + S[b], p.n_gh)
            if p.w is not None:
                g_mu, g_v = g_mu * p.w[sl], g_v * p.w[sl]
            la, nu = residual.item_sums(r, a, b, *residual.exact_weights(g_mu, g_v, r, a, b))
            lam_r, nu_r = lam_r + la, nu_r + nu
        if p.shard.world > 1:
            lam_r, nu_r = p.shard.sum(lam_r, nu_r)
        q = natural.step(r.q, r.Es.expand(N), lam_r, nu_r, rho)
        q = natural.gaussian(q.Lam, q.eta - q.Lam * q.m.mean())  # the common shift at the bound's optimum
        r = residual.Residual(q, *q_s(*p.residual, N, natural.second(q, None)))  # Eq. 15
        moved = float(((q.m - m).abs() / q.S.sqrt()).max())
        if moved < tol:
            break
        if moved > last:
            rho = min(rho, residual.RHO_MAX)
        last = moved
    return state._replace(r=r), done


def _whole(value, what: str, arg: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value or value < 0:
        raise DataError(f"{arg}: expected a whole number ≥ 0 ({what}), got {value!r}", arg=arg)
    return int(value)


def polish_plan(polish: int | None, sweeps: int | None, likelihood: str, ties: bool, full_batch: bool,
                has_residual: bool) -> tuple[int, int]:
    """How a fit ends (:func:`finish`): (full-batch steps, most residual sweeps a round), from the
    settings ``polish`` and ``residual_sweeps`` where given.

    Unset, both apply where the steps took mini-batches of the exact likelihood without ties (a
    full-batch fit's iterate is the full-batch one already; the linearised likelihood re-linearises per
    batch and ties move τ, which neither does): with the item residual, :data:`RESIDUAL_SWEEPS` sweeps
    and no full-batch step — on the 10⁶-label crowd of ``bench_scale.py`` and its 300-item analogue the
    sweeps alone reach the held-out log loss that further full-batch steps keep, and at 10⁶ labels in
    less time than one full-batch step (docs/gppl.md); without it :data:`POLISH_STEPS` full-batch steps."""
    polish = None if polish is None else _whole(polish, "full-batch steps after the mini-batches", "polish")
    sweeps = None if sweeps is None else _whole(sweeps, "sweeps of the item residual a round",
                                                "residual_sweeps")
    exact = likelihood == "exact" and not ties
    if (polish or sweeps) and not exact:
        arg = "polish" if polish else "residual_sweeps"
        raise DataError(f"{arg}: the full-batch steps take the exact likelihood without ties; pass "
                        f"{{likelihood='exact'}} on labels without ties, or {{{arg}=0}}", arg=arg,
                        settings=("likelihood", arg))
    if sweeps and not has_residual:
        raise DataError("residual_sweeps: the model has no item residual to sweep (it has one where its GP "
                        "is sparse, unless told otherwise); pass {residual_sweeps=0}", arg="residual_sweeps",
                        settings=("residual_sweeps",))
    on = exact and not full_batch
    if sweeps is None:
        sweeps = RESIDUAL_SWEEPS if on and has_residual else 0
    if polish is None:
        polish = POLISH_STEPS if on and not sweeps else 0
    return polish, sweeps


#: full-batch steps after a mini-batch fit without residual sweeps (:func:`polish_plan`)
POLISH_STEPS = 3

#: the most residual sweeps a round after a mini-batch fit with the item residual (:func:`polish_plan`)
RESIDUAL_SWEEPS = 30


def finish(state: State, p: Problem, steps: int, sweeps: int, chunk: int) -> tuple[State, int]:
    """End a mini-batch fit: the item residual swept to its optimum with q(f_m) held
    (:func:`sweep_residual`, at most ``sweeps`` sweeps), then ``steps`` times a full-batch step of every
    factor (:func:`full_batch_steps`) followed by the sweeps again. Returns the state and the sweeps
    taken in all."""
    taken = 0
    for k in range(steps + 1):
        if k:
            state = full_batch_steps(state, p, 1, chunk)
        if sweeps:
            state, n = sweep_residual(state, p, chunk, sweeps)
            taken += n
    return state, taken


def _residual_step(r: residual.Residual, p: Problem, y, ab, mu, v, tau, r_i, pi, w=None) -> residual.Residual:
    """One natural-gradient step of the item residual's q(r) and q(s_r) (:mod:`crowdzoo.gp.residual`) at
    the labels' marginals (μ, v) of z under the current q (``w``: the labels' weights, or None)."""
    if p.likelihood == "linearised":
        weights = residual.linearised_weights(mu, _Q(p, y, w), y, r, *ab)
    else:
        _, g_mu, g_v = _expected(p, tau, y, mu, v, w)
        weights = residual.exact_weights(g_mu, g_v, r, *ab)
    return residual.step(r, *ab, *weights, r_i, pi, *p.residual,
                         reduce=p.shard.sum if p.shard.world > 1 else None)


def _kernel_step(state: State, idx, pi, p: Problem) -> State:
    """One Adam step of θ up the batch's expected log-likelihood (plus log p(ℓ)) with q(u) held (its
    KL to N(0, I/s) does not depend on θ), and the basis at the new θ."""
    m_u, S_u = state.q.m, state.q.S
    Es = state.shape / state.rate

    def likelihood_term(theta):
        d, c = p.space.build(theta).pair_factors(p.a[idx], p.b[idx])
        marg = _marginals(d, c, m_u, S_u, Es, state.r, p.pairs(idx), state.delta)
        ell = pi * _expected(p, state.tau, p.y[idx], *marg, p.weights(idx))[0].sum()
        return ell if p.log_prior is None else ell + p.log_prior(theta)  # type-II MAP under a prior

    hyper = ascend(state.hyper, likelihood_term, p.kernel_lr, p.shard.sum)
    with torch.no_grad():
        basis = basis_of(p.space.build(hyper.theta), True)
    return state._replace(hyper=hyper, basis=basis)


def bound(state: State, idx, scale: float, problem: Problem) -> float:
    """Eq. 30 on the labels ``idx``, their likelihood term times ``scale``: likelihood term +
    E_q(s)[ln p(f_m|s)] − E[ln q(f_m)] + E[ln p(s) − ln q(s)] (the KL is the same in either basis)."""
    p, q = problem, state.q
    basis = _basis(state, p)
    idx = p.shard.local(idx)
    A_d, c = p.rows(basis, idx)
    Es, Elog_s = gamma_moments(state.shape, state.rate)
    ell, _, _ = _expected(p, state.tau, p.y[idx], *_marginals(A_d, c, q.m, q.S, Es, state.r, p.pairs(idx),
                                                              state.delta), p.weights(idx))
    kl_f = natural.kl(q, basis.K_inv, basis.logdet_K, Es, Elog_s, WHAT)
    kl_r = 0.0 if state.r is None else residual.kl(state.r, *p.residual)
    return float(scale * p.shard.sum(ell.sum()) - kl_f - kl_r - order.kl(state.delta, p.order_prior)
                 - kl_gamma(state.shape, state.rate, p.alpha0, p.beta0))


def fit_natgrad(model, data, seed: int = 0, likelihood: str | None = None,
                batch_size: int | None = None, delay: float = 1.0, forgetting_rate: float = 0.9,
                max_iter: int = 500, min_iter: int = 10, tol: float | None = None, eval_every: int = 5,
                eval_size: int = 2000, inner_iter: int = 3, n_gh: int = 20,
                learn_kernel: bool | None = None, learn_inducing: bool = False, kernel_lr: float = 0.3,
                rho_min: float | None = None, distributed: bool = False,
                progress_bar: bool | None = None, setup=None, resume=None, checkpoint=None,
                checkpoint_every: int = 0, callback=None, n_points: int = 64,
                polish: int | None = None, residual_sweeps: int | None = None) -> GPPLPosterior:
    """Fit GPPL by the paper's natural-gradient SVI (Alg. 1).

    ``batch_size`` P_i pairs per iteration (all pairs when P ≤ P_i; by default 1000, and the full
    batch up to 5·10⁴ pairs while the kernel learns: :func:`~crowdzoo.inference.hyper.default_batch_size`),
    ``delay`` ε and
    ``forgetting_rate`` r of ρ_i, ``likelihood`` ``"linearised"`` (Eq. 7–11, the paper) or ``"exact"``
    (Gauss–Hermite natural gradients), by default the one :func:`default_likelihood` picks, ``inner_iter``
    re-linearisations of G per batch. ``tol``: the stop rule's relative change of the bound between
    evaluations (every ``eval_every`` iterations); unset, 1e-4, or :data:`LEARNING_TOL` (3·10⁻⁴) while
    the kernel learns: the bound then keeps creeping up for tens of iterations as the length-scales of
    irrelevant features grow, a tail that leaves the predictions as they were (on the calibration
    battery 3·10⁻⁴ stops a third sooner at the same mean held-out log loss, .4486 against .4488).
    ``checkpoint``: a file the loop writes every ``checkpoint_every`` iterations and on
    KeyboardInterrupt; ``resume``: such a file, or a natgrad posterior, to continue from (the
    same posterior as an uninterrupted run; ``max_iter`` counts the whole run).
    ``learn_kernel`` / ``learn_inducing``: Adam steps of size ``kernel_lr`` on the log length-scales /
    the inducing inputs between the natural-gradient steps (module docstring). ``learn_kernel`` unset
    (the default) learns where the model leaves its length-scales to the median heuristic (a named
    kernel, ``lengthscale=None``, items with features) and each step takes every label (``batch_size``
    unset and at most 5·10⁴ labels, or a batch of all of them; always with a ``lengthscale_prior``):
    on the calibration battery that lowers pooled GPPL's held-out log loss from .453 to .449 on average
    (docs/gppl.md). ``False`` keeps the median heuristic. The steps climb the bound plus
    log p(ℓ) when the model has a ``lengthscale_prior`` (a type-II MAP estimate); q's step size then
    stays above ``rho_min`` (default 0.8 on the full batch, 0.1 on mini-batches; 0 when nothing is
    learned), since the length-scales' gradient with q held fixed is the bound's only when q keeps
    up with them. ``kernel_lr`` 0.3 and the floor 0.8 halve the time of 0.1 and 0.5 at the same
    held-out log loss on the calibration battery (``crowdzoo compare gppl-kernel``; the peers'
    problems: ``make bench-peers``).
    ``distributed``: data-parallel over the ranks of a ``torchrun`` launch
    (:mod:`crowdzoo.inference.distributed`): each rank keeps a shard of the labels, the step's
    statistics (and, with ``learn_kernel``, the length-scales' gradient) are summed across ranks, and
    only rank 0 shows progress and writes checkpoints. ``data`` may be this rank's shard alone
    (:meth:`~crowdzoo.PairwiseData.read_shard`), so that no rank holds every label.
    ``polish`` and ``residual_sweeps``: how a fit on mini-batches ends (:func:`finish`): the item
    residual's q(r) swept over every label with q(f_m) held, at most ``residual_sweeps`` sweeps until
    it settles (:func:`sweep_residual`, O(P) a sweep), then ``polish`` full-batch steps of every factor
    (of size ½ over every label in chunks of ``batch_size``, :func:`full_batch_steps`), each followed
    by the sweeps again. Unset, where the steps took mini-batches of the exact likelihood without
    ties: 30 sweeps at most and no full-batch step with the item residual, 3 full-batch steps without
    it; else neither (a full-batch fit's iterate is the full-batch one already). At hundreds of labels
    per item each batch sees an item through a few labels, and the last mini-batch iterate of its
    residual strays from the full-batch posterior, by an error that averaging the last iterates does
    not remove. On 991,668 labels over 3,000 items (``bench_scale.py``'s crowd) the sweeps took
    pooled GPPL's held-out log loss from .4563 to .4539, probit Bradley–Terry's (three full-batch
    steps had given .4547); on its 300-item analogue three full-batch steps after the sweeps changed it
    by under 10⁻⁴ (docs/gppl.md).
    ``data`` a :class:`~crowdzoo.data.ChoiceData`: the probit choice's natural-gradient route
    (:func:`~crowdzoo.models.gppl.natgrad_choices.fit_choices`, fixed length-scales, one process);
    ``n_points``: the antithetic pairs of its rule over rows of more than two items.
    """
    if hasattr(data, "sets"):  # a ChoiceData: the probit choice's route (natgrad_choices)
        from .natgrad_choices import fit_choices
        return fit_choices(model, data, seed=seed, likelihood=likelihood, batch_size=batch_size, delay=delay,
                           forgetting_rate=forgetting_rate, max_iter=max_iter, min_iter=min_iter, tol=tol,
                           eval_every=eval_every, eval_size=eval_size, n_gh=n_gh, learn_kernel=learn_kernel,
                           learn_inducing=learn_inducing, progress_bar=progress_bar, setup=setup,
                           callback=callback, n_points=n_points, distributed=distributed, resume=resume,
                           checkpoint=checkpoint, checkpoint_every=checkpoint_every)
    sh = shard(data, distributed)
    ties = data.has_ties if sh.world == 1 else bool(sh.sum(torch.tensor(float(data.has_ties))) > 0)
    learn_kernel = _learns(model, data, learn_kernel, resume, sh.n_labels, batch_size)
    alpha0, beta0 = require_gamma(model.prior_s(), "s_prior")
    start = at_learning_start(model, data.item_features) if learn_kernel else model  # median r = 1
    resume, setup = loop.resume_setup(resume, setup, lambda: start.setup(data, seed=seed))
    if likelihood is None:
        likelihood = default_likelihood(learn_kernel or learn_inducing, ties, setup)
    if likelihood not in ("linearised", "exact"):
        raise DataError(f"likelihood: expected 'linearised' or 'exact', got {likelihood!r}", arg="likelihood")
    if ties and likelihood != "exact":
        raise DataError("likelihood: the labels have ties (y = 0.5), which only the exact likelihood models "
                        "(the ordinal probit); pass {likelihood='exact'} or leave it unset", arg="likelihood",
                        settings=("likelihood",))
    a, b, y = label_tensors(data)
    a, b, y = (x[sh.lo - sh.offset:sh.hi - sh.offset] for x in (a, b, y))  # this rank's labels (a view)
    w = weight_tensor(data)
    w = None if w is None else w[sh.lo - sh.offset:sh.hi - sh.offset]
    P = sh.n_labels
    space = KernelSpace.of(model, data.item_features, setup, seed, learn_kernel, learn_inducing)
    learning = space is not None
    if tol is None:  # while the kernel learns the bound creeps on as irrelevant length-scales grow
        tol = LEARNING_TOL if learning else 1e-4
    batch_size = default_batch_size(batch_size, learning, P)
    log_prior = None if space is None else log_prior_of_theta(getattr(model, "lengthscale_prior", None),
                                                                data.item_features.shape[1], counted=sh.lead)
    problem = Problem(a, b, y, sh, alpha0, beta0, basis_of(setup, whitened=learning), likelihood, inner_iter,
                      n_gh, space, log_prior, kernel_lr,
                      tie_prior=model.prior_tau() if ties else None,
                      residual=None if setup.residual_prior is None
                      else require_gamma(setup.residual_prior, "shape_r0, rate_r0"), w=w,
                      order_prior=None if setup.order_prior is None else order.moments_of(setup.order_prior))
    if not learning and max(batch_size, eval_size) >= P:  # the steps or evaluations take every label
        problem = problem._replace(every=problem.basis.rows(a, b))
    settings = loop.Settings(batch_size=batch_size, delay=delay, forgetting_rate=forgetting_rate,
                             max_iter=max_iter, min_iter=min_iter, tol=tol, eval_every=eval_every,
                             eval_size=eval_size,
                             rho_min=rho_floor(rho_min, learning, batch_size >= P, full=0.8),
                             progress_bar=progress_bar, checkpoint=checkpoint,
                             checkpoint_every=checkpoint_every, callback=callback)
    steps, sweeps = polish_plan(polish, residual_sweeps, likelihood, ties, batch_size >= P,
                                problem.residual is not None)
    res = loop.run(loop.algorithm(init, step, bound, problem, P, state_gain(learning)), settings,
                   shard=sh, seed=seed, what=f"natgrad GPPL ({likelihood})",
                   advice="a larger {delay} ε or {forgetting_rate} r (smaller steps), a larger {batch_size}, "
                          "or fewer inducing points ({n_inducing})",
                   advice_settings=("delay", "forgetting_rate", "batch_size", "n_inducing"),
                   resume=resume, meta=dict(model=model, method="natgrad"), setup=setup)
    swept = 0
    if steps or sweeps:
        state, swept = finish(res.state, problem, steps, sweeps, min(batch_size, P))
        res = res._replace(state=state)
    return _posterior(model, data, res, problem, dict(likelihood=likelihood, inner_iter=inner_iter,
                                                       learn_kernel=learn_kernel, ranks=sh.world,
                                                       learn_inducing=learn_inducing, polish=steps,
                                                       residual_sweeps=swept))


def default_likelihood(learning: bool, ties: bool, setup) -> str:
    """The likelihood ``fit_natgrad`` uses unless told: ``"exact"`` when the kernel learns (the
    length-scales climb the bound of Eq. 30, which only the exact q maximises), for ties (the ordinal
    probit), where the GP is sparse and with the order effect; else the paper's ``"linearised"``.

    The linearisation about the mean shrinks the order effect δ towards 0 on simulated leagues
    (:func:`~crowdzoo.data.simulate_league`; docs/gppl.md, "An order effect"), where the exact
    likelihood agrees with EP.

    A sparse GP's pairs carry the conditional variance c_p / s of Eq. 19, which the linearisation about
    the mean (Eq. 9–11) leaves out while every prediction (Eq. 3) includes it: fitted as if there were
    no such noise and predicted with it, the probabilities come out too close to ½. On 991,668 labels
    over 3,000 items (M = 500, the item residual on; ``benchmarks/bench_scale.py --held-out``) the
    linearised route's held-out log loss was .621 (a 578 s command), the exact one's .456 (152 s), the
    items' win rates' .532."""
    if learning or ties or not setup.exact or getattr(setup, "order_prior", None) is not None:
        return "exact"
    return "linearised"


def _learns(model, data, learn_kernel: bool | None, resume, n_labels: int, batch_size: int | None) -> bool:
    """``learn_kernel`` as given, or unset: as the run resumed learned it, else where the model leaves
    its length-scales to the median heuristic (:func:`~crowdzoo.gp.learn.learns_by_default`) and the
    fit takes every label in each step (``batch_size`` unset and at most
    :data:`~crowdzoo.inference.hyper.LEARN_FULL_BATCH` labels, or a batch of all of them), the regime the
    calibration battery and the peers' problems measured; on mini-batches the length-scales settle
    short of the bound's optimum (docs/learn-kernel-batches.md) at a cost not measured at 10⁶ labels. A
    ``lengthscale_prior`` is learned (its MAP) whatever the batch, since a fixed kernel would ignore it."""
    if learn_kernel is not None:
        return bool(learn_kernel)
    ckpt = loop.read_checkpoint(resume)
    if ckpt is not None:  # a checkpoint's q lives in the basis its run chose (whitened when θ learned)
        return ckpt["state"].hyper is not None
    full = default_batch_size(batch_size, True, n_labels) >= n_labels
    prior = getattr(model, "lengthscale_prior", None) is not None
    return learns_by_default(model, data.item_features) and (full or prior)


def _posterior(model, data, res: loop.Result, problem: Problem, settings: dict) -> GPPLPosterior:
    """The posterior of a finished run: q(f_m) in f's coordinates, q(s), the learned kernel."""
    state = res.state
    basis = _basis(state, problem)
    m, S = basis.to_f(state.q.m, state.q.S)
    setup, learned = basis.setup, {}
    if problem.space is not None:
        model, learned = problem.space.learned(state.hyper.theta, setup)
    return GPPLPosterior(
        model=model, setup=setup, data=data, method="natgrad", weights=torch.ones(1, dtype=DTYPE),
        means=m[None], covs=S[None], s=(state.shape / state.rate).reshape(1), s_shape=float(state.shape),
        s_rate=float(state.rate), tau=None if state.tau is None else state.tau.reshape(1),
        **({} if state.r is None else dict(r_means=state.r.q.m[None], r_vars=state.r.q.S[None],
                                           s_r=state.r.Es.reshape(1))),
        **({} if state.delta is None else dict(order_means=state.delta.q.m.clone(),
                                               order_vars=state.delta.q.S.clone())),
        trace={"bound": np.asarray(res.stop.bounds), "bound_iteration": np.asarray(res.stop.iterations)},
        settings=dict(**settings, **learned, **res.settings), checkpoint=res.checkpoint)


def _linearised_step(q: Gaussian, A_d, y, Es, Q, K_inv, r_i, pi, inner_iter,
                     reduce=lambda *t: t, offset=0.0) -> Gaussian:
    """Eq. 17–18 with the linearised probit (Eq. 9–10) and Q from Eq. 8; G re-linearised
    ``inner_iter`` times about the updated mean (Alg. 1, lines 4–6).

    As in the authors' code, the forward model Φ(ẑ) and its Jacobian G are evaluated at the
    posterior *mean* of f_a − f_b (ẑ_p = f̂_a − f̂_b, G_p = φ(ẑ_p)), and the prior over Φ(z_p)
    that fixes Q treats f_a and f_b as independent with variance 1/E₀[s] (so Var z_p = 2/E₀[s]; ``Q``
    from :func:`_Q`). ``offset``: the rest of ẑ_p held fixed (the item residual's r̂_a − r̂_b).
    """
    mean, Lam, eta = q.m, q.Lam, q.eta
    for k in range(max(1, inner_iter)):
        if k:  # the mean of the last update (Λ⁻¹η: one Cholesky, no inverse)
            mean = natural.mean(Lam, eta, WHAT)
        mu = A_d.mean(mean)
        Phi = ndtr(mu + offset)
        # G_p = dΦ(ẑ_p)/d(f_a − f_b) at the mean, Eq. 10
        G = torch.exp(-0.5 * (mu + offset) ** 2) / math.sqrt(2 * math.pi)
        w = G * G / Q
        Lam_lik, eta_lik = reduce(pi * A_d.gram(w), pi * A_d.tmul(G / Q * (y - Phi + G * mu)))
        Lam, eta = natural.natural_params(q, Es * K_inv, Lam_lik, eta_lik, r_i)
    if not torch.isfinite(eta).all():
        raise NumericalError("natgrad: the linearised update produced NaN. Try: a larger {delay} ε.",
                             settings=("delay",))
    return natural.gaussian(Lam, eta, WHAT)
