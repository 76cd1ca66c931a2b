"""The paper's stochastic variational inference for GPPL (Simpson & Gurevych 2020, Alg. 1).

q(f_m, s) = q(f_m) q(s) with q(f_m) = N(m, S) over the M inducing utilities (Eq. 12–14) and
q(s) = Gamma(α, β) (Eq. 15). Each iteration draws a mini-batch of P_i pairs and takes a natural-
gradient step of size ρ_i = (i + ε)^(−r) on the natural parameters (S⁻¹, S⁻¹m), scaling the
batch by π_i = P / P_i (Eq. 17–18); q(s) is then updated in closed form (Eq. 15). Only O(M²)
numbers live between iterations, so memory does not grow with P.

Two likelihood treatments, chosen by ``likelihood=``:

``"linearised"`` (the paper): the probit is replaced by a Gaussian with noise Q from a
    beta-Bernoulli moment match (Eq. 7–8) and linearised about the current mean (Eq. 9–11), with
    an inner loop that re-linearises G on the mini-batch (Alg. 1, lines 4–6).
``"exact"`` (beyond the paper): the natural gradient of the exact expected log-likelihood
    E_q[log Φ(y'(f_a − f_b))], computed by Gauss–Hermite quadrature of each pair's 1-D marginal
    (as Hensman et al. 2015 do for GP classification). Same cost per iteration.

The bound of Eq. 30 (its likelihood term by Gauss–Hermite quadrature in both cases) is
evaluated every ``eval_every`` iterations on a fixed random subset of at most ``eval_size`` labels
(all of them when P ≤ ``eval_size``), scaled to P: fixed so that successive values differ by the
progress of q alone, bounded so that memory stays flat in P. The run stops when the bound changes
by less than ``tol`` (relative) between two evaluations, or after ``max_iter`` iterations.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch
from torch.special import ndtr

from ..errors import ConvergenceWarning, DataError, NumericalError
from ..linalg import DTYPE, cho_solve, cholesky, logdet_from_chol, sym
from ..models.likelihoods import expected_log_probit, probit_var_gap, var_of_probit
from ..posterior import GPPLPosterior
from ._common import check_finite, label_tensors, progress


class NatGradState(NamedTuple):
    """Between iterations: natural parameters of q(f_m) and the Gamma q(s)."""

    Lam: torch.Tensor  # S⁻¹ (M, M)
    eta: torch.Tensor  # S⁻¹ m (M,)
    shape: float  # α
    rate: float  # β


def rho(i: int, delay: float, forgetting_rate: float) -> float:
    """Step size ρ_i = (i + ε)^(−r) (Eq. 18)."""
    return (i + delay) ** (-forgetting_rate)


@dataclass
class StopRule:
    """The stop rule of every natural-gradient loop, fed the bound each time it is evaluated.

    * **converged** when the bound changes by less than ``tol`` (relative) between two evaluations,
      once ``min_iter`` iterations have run;
    * **falling**: a bound that falls at ``patience`` evaluations in a row means the steps overshoot
      (e.g. full natural-gradient steps, ρ = 1, on a non-conjugate likelihood). The step size is then
      halved for the rest of the fit (:attr:`scale` multiplies ρ_i) and a :class:`ConvergenceWarning`
      says so; after ``max_halvings`` halvings that did not stop the fall the fit stops, with a warning.

    :meth:`finish` warns when the fit ran out of iterations unconverged, naming the settings to change.
    """

    tol: float
    min_iter: int
    what: str
    patience: int = 3
    max_halvings: int = 5
    bounds: list = field(default_factory=list)
    iterations: list = field(default_factory=list)
    scale: float = 1.0
    falls: int = 0
    halvings: int = 0
    converged: bool = False
    reason: str = "max_iter"

    def rho(self, i: int, delay: float, forgetting_rate: float) -> float:
        """This iteration's step size: ``scale`` × ρ_i of Eq. 18."""
        return self.scale * rho(i, delay, forgetting_rate)

    def update(self, i: int, bound: float, iterations_run: int) -> bool:
        """Record the bound of iteration ``i``; True when the fit should stop."""
        prev = self.bounds[-1] if self.bounds else None
        self.bounds.append(bound)
        self.iterations.append(i)
        if prev is None:
            return False
        if iterations_run >= self.min_iter and abs(bound - prev) < self.tol * abs(prev):
            self.converged, self.reason = True, "converged"
            return True
        self.falls = self.falls + 1 if bound < prev else 0
        if self.falls < self.patience:
            return False
        self.falls = 0
        if self.halvings == self.max_halvings:
            self.reason = "falling"
            warnings.warn(f"{self.what}: the lower bound fell at {self.patience} evaluations in a row "
                          f"(to {bound:.4g} at iteration {i}) even after halving the step size "
                          f"{self.halvings} times; stopped unconverged. Try a larger delay ε, a larger "
                          "forgetting_rate r, or a larger batch_size.", ConvergenceWarning, stacklevel=4)
            return True
        self.halvings += 1
        self.scale *= 0.5
        warnings.warn(f"{self.what}: the lower bound fell at {self.patience} evaluations in a row "
                      f"(to {bound:.4g} at iteration {i}); step size halved (ρ_i × {self.scale:g}) for the "
                      "rest of the fit. A larger delay ε or forgetting_rate r avoids this.",
                      ConvergenceWarning, stacklevel=4)
        return False

    def finish(self, max_iter: int) -> None:
        """Warn if the fit ran out of iterations before the rule was met."""
        if self.reason == "max_iter" and self.tol > 0:  # tol = 0: a fixed number of iterations asked for
            last = (f"; the bound last changed by {abs(self.bounds[-1] - self.bounds[-2]):.3g} "
                    f"(relative {abs(self.bounds[-1] - self.bounds[-2]) / abs(self.bounds[-2]):.2g})"
                    if len(self.bounds) >= 2 else "")
            warnings.warn(f"{self.what}: stopped after max_iter={max_iter} iterations without meeting "
                          f"the stop rule (relative change of the bound < tol={self.tol:g}){last}. "
                          "Try a larger max_iter, or a larger tol.", ConvergenceWarning, stacklevel=3)

    def settings(self) -> dict:
        return dict(converged=self.converged, stop_reason=self.reason, step_scale=self.scale)


def pair_rows(setup, a, b):
    """A_d (P, M): rows A_a − A_b with A = K_nm K_mm⁻¹, and c (P,): s · Var[f_a − f_b | f_m]."""
    d, c = setup.pair_terms(a, b)
    A_d = torch.linalg.solve_triangular(setup.L_mm.T, d.T, upper=True).T
    return A_d, c


def beta_bernoulli_Q(prior_var_z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Q_pp of Eq. 8: variance of the posterior beta-Bernoulli over Φ(z_p).

    The beta prior Beta(γ, λ) matches the prior mean and variance of Φ(z_p), z_p ~ N(0, v_p): the
    mean is ½ by symmetry, so γ = λ, and Var[Φ(z_p)] = ¼ / (2γ + 1) gives
    γ = ½ (¼ / Var − 1) = ½ (¼ − Var) / Var with Var[Φ(z_p)] = arcsin(v_p / (1 + v_p)) / (2π) in
    closed form (:func:`~crowdzoo.models.likelihoods.var_of_probit`). After one label y_p the
    posterior Beta(γ + y, λ + 1 − y) has variance Q_pp.

    (A quadrature of Var[Φ(z)] breaks down for a wide prior: past v ≈ 50 every Gauss–Hermite node
    sits where Φ is 0 or 1, the estimate is exactly ¼ and Q collapses to ~0, weighting each label
    ~10⁶ times too much. crowdGPPL's prior variance of z is in the thousands.)
    """
    gap = probit_var_gap(prior_var_z)  # ¼ − Var, to full precision however wide the prior
    var = var_of_probit(prior_var_z).clamp_min(1e-300)
    gamma = 0.5 * gap / var
    lam = gamma
    return (gamma + y) * (lam + 1.0 - y) / (gamma + lam + 1.0) ** 2


def _moments(state: NatGradState, L_Lam=None):
    L_Lam = cholesky(state.Lam, what="S⁻¹ (natural-gradient precision)") if L_Lam is None else L_Lam
    S = cho_solve(L_Lam, torch.eye(state.Lam.shape[0], dtype=DTYPE))
    m = S @ state.eta
    return m, sym(S), L_Lam


def _marginals(A_d, c, m, S, Es):
    """Mean and variance of f_a − f_b under q (Eq. 14 with the E[s] of Eq. 15)."""
    mu = A_d @ m
    v = c / Es + ((A_d @ S) * A_d).sum(-1)
    return mu, v


def _bound(ell_sum, m, S, L_Lam, K_inv, logdet_K, shape, rate, alpha0, beta0):
    """Eq. 30: likelihood term + E_q(s)[ln p(f_m|s)] − E[ln q(f_m)] + E[ln p(s) − ln q(s)].

    ``L_Lam``: Cholesky factor of S⁻¹, so −log|S| = log|S⁻¹| = ``logdet_from_chol(L_Lam)``."""
    M = m.shape[0]
    Es = shape / rate
    Elog_s = torch.digamma(torch.tensor(shape, dtype=DTYPE)) - math.log(rate)
    kl_f = 0.5 * (Es * (torch.trace(K_inv @ S) + m @ K_inv @ m) - M - M * Elog_s
                  + logdet_K + logdet_from_chol(L_Lam))
    kl_s = ((shape - alpha0) * torch.digamma(torch.tensor(shape, dtype=DTYPE))
            - math.lgamma(shape) + math.lgamma(alpha0)
            + alpha0 * (math.log(rate) - math.log(beta0)) + shape * (beta0 - rate) / rate)
    return float(ell_sum - kl_f - kl_s)


def fit_natgrad(model, data, seed: int = 0, likelihood: str = "linearised",
                batch_size: int = 1000, delay: float = 1.0, forgetting_rate: float = 0.9,
                max_iter: int = 500, min_iter: int = 10, tol: float = 1e-4, eval_every: int = 5,
                eval_size: int = 2000,
                inner_iter: int = 3, n_gh: int = 20, progress_bar: bool | None = None,
                setup=None, resume: GPPLPosterior | None = None) -> GPPLPosterior:
    """Fit GPPL by the paper's natural-gradient SVI (Alg. 1).

    ``batch_size`` P_i pairs per iteration (all pairs when P ≤ P_i), ``delay`` ε and
    ``forgetting_rate`` r of ρ_i, ``likelihood`` ``"linearised"`` (Eq. 7–11, the paper) or
    ``"exact"`` (Gauss–Hermite natural gradients), ``inner_iter`` re-linearisations of G per batch.
    ``resume``: a natgrad posterior (e.g. from :func:`crowdzoo.load`) to continue from, with the
    step-size schedule ρ_i carried on from its last iteration (checkpoint and resume).
    """
    if likelihood not in ("linearised", "exact"):
        raise DataError(f"likelihood: expected 'linearised' or 'exact', got {likelihood!r}")
    prior = model.prior_s()
    if type(prior).__name__ != "Gamma":
        raise DataError("s_prior: natgrad needs the conjugate Gamma prior on s (Eq. 15); use "
                        "method='svi', 'nuts' or 'ep' for other priors")
    alpha0, beta0 = float(prior.concentration), float(prior.rate)
    if resume is not None:
        setup = resume.setup
    setup = setup or model.setup(data.item_features, seed=seed)
    a, b, y = label_tensors(data)
    P, M = a.shape[0], setup.M
    P_i = min(batch_size, P)
    pi = P / P_i
    gen = torch.Generator().manual_seed(seed)
    L_K = setup.L_mm
    eye = torch.eye(M, dtype=DTYPE)
    K_inv = cho_solve(L_K, eye)
    logdet_K = logdet_from_chol(L_K)
    # initial q: the prior at E[s] = α₀/β₀
    Es0 = alpha0 / beta0
    state = NatGradState(Lam=Es0 * K_inv, eta=torch.zeros(M, dtype=DTYPE), shape=alpha0,
                         rate=beta0)
    stop = StopRule(tol=tol, min_iter=min_iter, what=f"natgrad GPPL ({likelihood})")
    start = 0
    ev = torch.randperm(P, generator=gen)[:eval_size] if P > eval_size else torch.arange(P)
    A_ev, c_ev = pair_rows(setup, a[ev], b[ev])
    y_ev, pi_ev = y[ev], P / ev.shape[0]
    if resume is not None:
        if resume.method != "natgrad":
            raise DataError(f"resume: expected a natgrad posterior, got method {resume.method!r}")
        L_S = cholesky(resume.covs[0], what="S of the resumed posterior")
        Lam = cho_solve(L_S, eye)
        state = NatGradState(Lam=Lam, eta=Lam @ resume.means[0], shape=resume.s_shape,
                             rate=resume.s_rate)
        stop.bounds = list(resume.trace["bound"])
        stop.iterations = list(resume.trace["bound_iteration"])
        stop.scale = float(resume.settings.get("step_scale", 1.0))
        start = int(resume.settings["iterations"])
    with progress(max_iter, f"natgrad ({likelihood})", progress_bar) as bar:
        for i in range(start + 1, start + max_iter + 1):
            # sampled with replacement: O(P_i) work and memory per step, whatever P is
            idx = torch.randint(P, (P_i,), generator=gen) if P_i < P else torch.arange(P)
            A_d, c = pair_rows(setup, a[idx], b[idx])
            yb = y[idx]
            Es = state.shape / state.rate
            m, S, _ = _moments(state)
            r_i = stop.rho(i, delay, forgetting_rate)
            if likelihood == "linearised":
                state = _linearised_step(state, A_d, yb, m, Es, Es0, K_inv, r_i, pi, inner_iter)
            else:
                mu, v = _marginals(A_d, c, m, S, Es)
                _, g_mu, g_v = expected_log_probit(yb, mu, v, n_gh)
                Lam_lik = -2.0 * pi * (A_d.T * g_v) @ A_d
                eta_lik = pi * A_d.T @ (g_mu - 2.0 * g_v * mu)
                state = state._replace(Lam=sym((1 - r_i) * state.Lam + r_i * (Es * K_inv + Lam_lik)),
                                       eta=(1 - r_i) * state.eta + r_i * eta_lik)
            # q(s), Eq. 15
            m, S, L_Lam = _moments(state)
            shape = alpha0 + 0.5 * M
            rate = beta0 + 0.5 * float(torch.trace(K_inv @ (S + torch.outer(m, m))))
            if likelihood == "exact" and c.any():  # the likelihood's pull through c / E[s] (scale_rate)
                _, _, g_v = expected_log_probit(yb, *_marginals(A_d, c, m, S, Es), n_gh)
                rate = scale_rate(rate, shape, float(-pi * (g_v * c).sum()))
            state = state._replace(shape=shape, rate=rate)
            bar.update()
            if (i - start) % eval_every and i - start != max_iter:
                continue
            # the bound of Eq. 30 on the fixed evaluation subset
            mu, v = _marginals(A_ev, c_ev, m, S, shape / rate)
            ell, _, _ = expected_log_probit(y_ev, mu, v, n_gh)
            bound = _bound(pi_ev * ell.sum(), m, S, L_Lam, K_inv, logdet_K, shape, rate, alpha0, beta0)
            check_finite(bound, "the lower bound (Eq. 30)", i,
                         "a larger delay ε or forgetting rate r (smaller steps), a larger batch_size, "
                         "or fewer inducing points")
            bar.set_postfix(bound=f"{bound:.2f}", E_s=f"{shape / rate:.3g}")
            if stop.update(i, bound, i - start):
                break
    stop.finish(max_iter)
    m, S, _ = _moments(state)
    Es = state.shape / state.rate
    return GPPLPosterior(
        model=model, setup=setup, data=data, method="natgrad", weights=torch.ones(1, dtype=DTYPE),
        means=m[None], covs=S[None], s=torch.tensor([Es], dtype=DTYPE), s_shape=state.shape,
        s_rate=state.rate,
        trace={"bound": np.asarray(stop.bounds), "bound_iteration": np.asarray(stop.iterations)},
        settings=dict(seed=seed, likelihood=likelihood, batch_size=P_i, delay=delay,
                      forgetting_rate=forgetting_rate, max_iter=max_iter, tol=tol, eval_every=eval_every,
                      eval_size=int(ev.shape[0]), inner_iter=inner_iter, iterations=i,
                      **stop.settings()))


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


def _linearised_step(state, A_d, y, m, Es, Es0, K_inv, r_i, pi, inner_iter):
    """Eq. 17–18 with the linearised probit (Eq. 9–10) and Q from Eq. 8; G re-linearised
    ``inner_iter`` times about the updated mean (Alg. 1, lines 4–6).

    As in the authors' code, the forward model Φ(ẑ) and its Jacobian G are evaluated at the
    posterior *mean* of f_a − f_b (ẑ_p = f̂_a − f̂_b, G_p = φ(ẑ_p)), and the prior over Φ(z_p)
    that fixes Q treats f_a and f_b as independent with variance 1/E₀[s] (so Var z_p = 2/E₀[s]).
    """
    Q = beta_bernoulli_Q(torch.full_like(y, 2.0 / Es0), y)
    new = state
    mean = m
    for _ in range(max(1, inner_iter)):
        mu = A_d @ mean
        Phi = ndtr(mu)
        # G_p = dΦ(ẑ_p)/d(f_a − f_b) at the mean, Eq. 10
        G = torch.exp(-0.5 * mu ** 2) / math.sqrt(2 * math.pi)
        w = G * G / Q
        Lam = sym((1 - r_i) * state.Lam + r_i * (Es * K_inv + pi * (A_d.T * w) @ A_d))
        eta = (1 - r_i) * state.eta + r_i * pi * A_d.T @ (G / Q * (y - Phi + G * mu))
        new = state._replace(Lam=Lam, eta=eta)
        mean, _, _ = _moments(new)
    if not torch.isfinite(new.eta).all():
        raise NumericalError("natgrad: the linearised update produced NaN. Try: a larger delay ε.")
    return new
