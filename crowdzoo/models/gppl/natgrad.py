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

The bound of Eq. 30 (its likelihood term by Gauss–Hermite quadrature in both cases) decides
convergence (:class:`~crowdzoo.inference.natgrad.StopRule`).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from torch.special import ndtr

from ...errors import DataError, NumericalError
from ...gp.conjugate import (
    gamma_moments,
    kl_gamma,
    kl_gaussian,
    q_s,
    require_gamma,
    scale_rate,
    second_moment,
)
from ...gp.linalg import DTYPE, cho_solve, cholesky, logdet_from_chol, sym
from ...gp.probit import beta_bernoulli_Q, expected_log_probit
from ...inference import natgrad as loop
from ...inference.common import label_tensors
from .posterior import GPPLPosterior


class NatGradState(NamedTuple):
    """Between iterations: natural parameters of q(f_m) and the Gamma q(s)."""

    Lam: torch.Tensor  # S⁻¹ (M, M)
    eta: torch.Tensor  # S⁻¹ m (M,)
    shape: torch.Tensor  # α
    rate: torch.Tensor  # β


def _moments(state: NatGradState):
    L_Lam = cholesky(state.Lam, what="S⁻¹ (natural-gradient precision)")
    S = cho_solve(L_Lam, torch.eye(state.Lam.shape[0], dtype=DTYPE))
    return S @ state.eta, sym(S), L_Lam


def _marginals(A_d, c, m, S, Es):
    """Mean and variance of f_a − f_b under q (Eq. 14 with the E[s] of Eq. 15)."""
    return A_d @ m, c / Es + ((A_d @ S) * A_d).sum(-1)


def fit_natgrad(model, data, seed: int = 0, likelihood: str = "linearised",
                batch_size: int = 1000, delay: float = 1.0, forgetting_rate: float = 0.9,
                max_iter: int = 500, min_iter: int = 10, tol: float = 1e-4, eval_every: int = 5,
                eval_size: int = 2000, inner_iter: int = 3, n_gh: int = 20,
                progress_bar: bool | None = None, setup=None, resume=None, checkpoint=None,
                checkpoint_every: int = 0, callback=None) -> GPPLPosterior:
    """Fit GPPL by the paper's natural-gradient SVI (Alg. 1).

    ``batch_size`` P_i pairs per iteration (all pairs when P ≤ P_i), ``delay`` ε and
    ``forgetting_rate`` r of ρ_i, ``likelihood`` ``"linearised"`` (Eq. 7–11, the paper) or
    ``"exact"`` (Gauss–Hermite natural gradients), ``inner_iter`` re-linearisations of G per batch.
    ``checkpoint``: a file the loop writes every ``checkpoint_every`` iterations and on
    KeyboardInterrupt; ``resume``: such a file, or a natgrad posterior, to continue from (the
    same posterior as an uninterrupted run; ``max_iter`` counts the whole run).
    """
    if likelihood not in ("linearised", "exact"):
        raise DataError(f"likelihood: expected 'linearised' or 'exact', got {likelihood!r}")
    alpha0, beta0 = require_gamma(model.prior_s(), "s_prior")
    resume, setup = loop.resume_setup(resume, setup, lambda: model.setup(data, seed=seed))
    a, b, y = label_tensors(data)
    M = setup.M
    L_K = setup.L_mm
    K_inv = cho_solve(L_K, torch.eye(M, dtype=DTYPE))
    logdet_K = logdet_from_chol(L_K)
    Es0 = alpha0 / beta0

    def init(gen):  # q: the prior at E[s] = α₀/β₀
        return NatGradState(Lam=Es0 * K_inv, eta=torch.zeros(M, dtype=DTYPE),
                            shape=torch.tensor(alpha0, dtype=DTYPE), rate=torch.tensor(beta0, dtype=DTYPE))

    def step(state, idx, r_i, pi):
        A_d, c = setup.pair_rows(a[idx], b[idx])
        yb = y[idx]
        Es = state.shape / state.rate
        m, S, _ = _moments(state)
        if likelihood == "linearised":
            state = _linearised_step(state, A_d, yb, m, Es, Es0, K_inv, r_i, pi, inner_iter)
        else:
            mu, v = _marginals(A_d, c, m, S, Es)
            _, g_mu, g_v = expected_log_probit(yb, mu, v, n_gh)
            Lam_lik = -2.0 * pi * (A_d.T * g_v) @ A_d
            eta_lik = pi * A_d.T @ (g_mu - 2.0 * g_v * mu)
            state = state._replace(Lam=sym((1 - r_i) * state.Lam + r_i * (Es * K_inv + Lam_lik)),
                                   eta=(1 - r_i) * state.eta + r_i * eta_lik)
        m, S, _ = _moments(state)
        shape, rate = q_s(alpha0, beta0, M, second_moment(K_inv, m, S))  # Eq. 15
        if likelihood == "exact" and c.any():  # the likelihood's pull through c / E[s] (scale_rate)
            _, _, g_v = expected_log_probit(yb, *_marginals(A_d, c, m, S, Es), n_gh)
            rate = scale_rate(rate, shape, -pi * (g_v * c).sum())
        return state._replace(shape=shape, rate=rate)

    def bound(state, idx, scale):
        """Eq. 30: likelihood term + E_q(s)[ln p(f_m|s)] − E[ln q(f_m)] + E[ln p(s) − ln q(s)]."""
        m, S, L_Lam = _moments(state)
        A_d, c = setup.pair_rows(a[idx], b[idx])
        Es, Elog_s = gamma_moments(state.shape, state.rate)
        ell, _, _ = expected_log_probit(y[idx], *_marginals(A_d, c, m, S, Es), n_gh)
        kl_f = kl_gaussian(second_moment(K_inv, m, S), M, logdet_K, -logdet_from_chol(L_Lam), Es, Elog_s)
        return float(scale * ell.sum() - kl_f - kl_gamma(state.shape, state.rate, alpha0, beta0))

    settings = loop.Settings(batch_size, delay, forgetting_rate, max_iter, min_iter, tol, eval_every,
                             eval_size)
    res = loop.run(loop.Problem(init, step, bound, a.shape[0]), settings, seed=seed,
                   what=f"natgrad GPPL ({likelihood})",
                   advice="a larger delay ε or forgetting rate r (smaller steps), a larger batch_size, "
                          "or fewer inducing points",
                   progress_bar=progress_bar, resume=resume, checkpoint=checkpoint,
                   checkpoint_every=checkpoint_every, callback=callback,
                   meta=dict(model=model, method="natgrad"), setup=setup)
    state = res.state
    m, S, _ = _moments(state)
    return GPPLPosterior(
        model=model, setup=setup, data=data, method="natgrad", weights=torch.ones(1, dtype=DTYPE),
        means=m[None], covs=S[None], s=(state.shape / state.rate).reshape(1), s_shape=float(state.shape),
        s_rate=float(state.rate),
        trace={"bound": np.asarray(res.stop.bounds), "bound_iteration": np.asarray(res.stop.iterations)},
        settings=dict(likelihood=likelihood, inner_iter=inner_iter, **res.settings),
        checkpoint=res.checkpoint)


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
        mean = _moments(new)[0]
    if not torch.isfinite(new.eta).all():
        raise NumericalError("natgrad: the linearised update produced NaN. Try: a larger delay ε.")
    return new
