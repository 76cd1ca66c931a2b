"""Natural-gradient VI for GPPL-per-user, batched over users.

Every user j has q(f_m,j) = N(m_j, S_j) and q(s_j) = Gamma(α_j, β_j) (Eq. 12–15 per user). All
users are updated at once: each label adds its rank-one term to its own user's natural
parameters (an ``index_add`` over labels, in chunks), then one batched Cholesky solves every
user. Steps are full-batch, ρ_i = (i + ε)^(−r) as in Eq. 18 — each user's data are few, so no
user is left out of an iteration — with the exact expected probit log-likelihood by Gauss–Hermite
quadrature (the ``"exact"`` natgrad of GPPL). The bound (Eq. 30 summed over users) decides
convergence. Memory is O(U M²) plus a chunk of labels.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from torch.special import ndtr

from ..errors import DataError
from ..linalg import DTYPE, cho_solve, cholesky, logdet_from_chol
from ..lookup import positions
from ..models.likelihoods import expected_log_probit
from ._common import check_finite, label_tensors, progress
from .natgrad import StopRule, pair_rows, scale_rate

_CHUNK = 2**20


def _accumulate(U, j, rows, lam, nu):
    """Σ_p∈user λ_p r_p r_pᵀ (U, M, M) and Σ_p ν_p r_p (U, M), chunked over labels."""
    M = rows.shape[1]
    Lam = torch.zeros(U, M, M, dtype=DTYPE)
    eta = torch.zeros(U, M, dtype=DTYPE).index_add_(0, j, rows * nu[:, None])
    step = max(1, _CHUNK // (M * M))
    for lo in range(0, rows.shape[0], step):
        r = rows[lo:lo + step]
        Lam.index_add_(0, j[lo:lo + step], lam[lo:lo + step, None, None] * r[:, :, None] * r[:, None, :])
    return Lam, eta


def fit_natgrad_per_user(model, data, seed: int = 0, delay: float = 1.0, forgetting_rate: float = 0.9,
                         max_iter: int = 300, min_iter: int = 10, tol: float = 1e-4, n_gh: int = 20,
                         progress_bar: bool | None = None, setup=None):
    """Fit one GPPL per user (module docstring); returns a :class:`PerUserPosterior`."""
    if data.users is None:
        raise DataError("users: GPPL-per-user needs a user per label (PairwiseData(..., users=...))")
    prior = model.prior_s()
    if type(prior).__name__ != "Gamma":
        raise DataError("s_prior: GPPL-per-user natgrad needs the conjugate Gamma prior on s (Eq. 15)")
    alpha0, beta0 = float(prior.concentration), float(prior.rate)
    setup = setup or model.setup(data.item_features, seed=seed)
    a, b, y = label_tensors(data)
    j = torch.from_numpy(data.users).long()
    U, M = data.n_users, setup.M
    rows, c = pair_rows(setup, a, b)
    eye = torch.eye(M, dtype=DTYPE)
    K_inv = cho_solve(setup.L_mm, eye)
    logdet_K = logdet_from_chol(setup.L_mm)
    shape = torch.full((U,), alpha0, dtype=DTYPE)
    rate = torch.full((U,), beta0, dtype=DTYPE)
    Lam = (alpha0 / beta0) * K_inv.expand(U, M, M).clone()
    eta = torch.zeros(U, M, dtype=DTYPE)
    stop = StopRule(tol=tol, min_iter=min_iter, what="natgrad GPPL-per-user")
    with progress(max_iter, "natgrad GPPL-per-user", progress_bar) as bar:
        for i in range(1, max_iter + 1):
            L = cholesky(Lam, what="S⁻¹ of a user")
            S = torch.cholesky_inverse(L)
            m = (S @ eta[..., None])[..., 0]
            Es = shape / rate
            mu = (rows * m[j]).sum(-1)
            var = ((rows[:, None, :] @ S[j])[:, 0, :] * rows).sum(-1) + c / Es[j]
            ell, g_mu, g_v = expected_log_probit(y, mu, var, n_gh)
            if i > 1:  # the bound of the q that this iteration starts from (Eq. 30, per user)
                quad = (K_inv * S).sum((-1, -2)) + ((m @ K_inv) * m).sum(-1)
                Elog = torch.digamma(shape) - torch.log(rate)
                logdet_S = -logdet_from_chol(L)
                kl_f = 0.5 * (Es * quad - M - M * Elog + logdet_K - logdet_S)
                kl_s = ((shape - alpha0) * torch.digamma(shape) - torch.lgamma(shape) + math.lgamma(alpha0)
                        + alpha0 * (torch.log(rate) - math.log(beta0)) + shape * (beta0 - rate) / rate)
                bound = float(ell.sum() - kl_f.sum() - kl_s.sum())
                check_finite(bound, "the lower bound (Eq. 30, summed over users)", i,
                             "a larger delay ε or forgetting rate r (smaller steps)")
                bar.set_postfix(bound=f"{bound:.2f}")
                if stop.update(i, bound, i - 1):
                    break
            r_i = stop.rho(i, delay, forgetting_rate)
            Lam_lik, eta_lik = _accumulate(U, j, rows, -2.0 * g_v, g_mu - 2.0 * g_v * mu)
            Lam = (1 - r_i) * Lam + r_i * (Es[:, None, None] * K_inv + Lam_lik)
            Lam = 0.5 * (Lam + Lam.transpose(-1, -2))
            eta = (1 - r_i) * eta + r_i * eta_lik
            L = cholesky(Lam, what="S⁻¹ of a user")
            S = torch.cholesky_inverse(L)
            m = (S @ eta[..., None])[..., 0]
            shape = torch.full((U,), alpha0 + 0.5 * M, dtype=DTYPE)
            rate = beta0 + 0.5 * ((K_inv * S).sum((-1, -2)) + ((m @ K_inv) * m).sum(-1))
            # the likelihood's pull on q(s) through c / E[s] (g_v from this iteration's start,
            # the same at the fixed point)
            rate = scale_rate(rate, shape, torch.zeros(U, dtype=DTYPE).index_add_(0, j, -g_v * c))
            bar.update()
    stop.finish(max_iter)
    return PerUserPosterior(model=model, setup=setup, data=data, means=m, covs=S,
                            s_shape=shape, s_rate=rate, trace={"bound": np.asarray(stop.bounds)},
                            settings=dict(seed=seed, delay=delay, forgetting_rate=forgetting_rate,
                                          max_iter=max_iter, tol=tol, iterations=i, **stop.settings()))


class PerUserPosterior:
    """q(f_m,j) = N(``means[j]``, ``covs[j]``) and q(s_j) = Gamma(``s_shape[j]``, ``s_rate[j]``),
    E[s_j] = ``s[j]``, for every user j."""

    method = "natgrad"
    weights = torch.ones(1, dtype=torch.float64)
    sample_stats: dict = {}  # no sampler: an optimisation route

    def __init__(self, model, setup, data, means, covs, s_shape, s_rate, trace, settings):
        self.model, self.setup, self.data = model, setup, data
        self.means, self.covs, self.s_shape, self.s_rate = means, covs, s_shape, s_rate
        self.trace, self.settings = trace, settings

    @property
    def s(self) -> torch.Tensor:
        """E[s_j] of every user."""
        return self.s_shape / self.s_rate

    def to_arviz(self, n_draws: int = 500, seed: int = 0):
        """An ArviZ ``DataTree``; see :func:`crowdzoo.diagnostics.arviz.per_user_to_arviz`."""
        from ..diagnostics.arviz import per_user_to_arviz

        return per_user_to_arviz(self, n_draws=n_draws, seed=seed)

    def _rows(self, ids):
        return positions("a, b", ids, self.data.item_ids, hint=False)

    def _users(self, users):
        return positions("users", users, self.data.user_ids, what="user", hint=False)

    def _consensus(self):
        """Mean of the users' utilities at the inducing items: N(mean m_j, Σ S_j / U²)."""
        U = self.means.shape[0]
        return self.means.mean(0), self.covs.sum(0) / U**2, 1.0 / (self.s.reciprocal().mean())

    def latent_moments(self, a, b, users=None):
        """Mean and variance (1, n) of f_a − f_b under each pair's user's GPPL (or the consensus
        for users=None): what :func:`predict_proba` and the query strategies of
        :mod:`crowdzoo.active` use."""
        a, b = self._rows(a), self._rows(b)
        rows, c = pair_rows(self.setup, a, b)
        if users is None:
            m, S, s = self._consensus()
            mu = rows @ m
            var = ((rows @ S) * rows).sum(-1) + c / s / self.means.shape[0]
        else:
            j = self._users(users)
            mu = (rows * self.means[j]).sum(-1)
            var = ((rows[:, None, :] @ self.covs[j])[:, 0, :] * rows).sum(-1) + c / self.s[j]
        return mu[None], var[None]

    def predict_proba(self, a, b, users=None) -> np.ndarray:
        """P(a ≻ b): each pair's user's own GPPL, or the consensus (mean utility) for users=None."""
        mu, var = self.latent_moments(a, b, users)
        return ndtr(mu / torch.sqrt(1.0 + var))[0].numpy()

    def utilities(self, users=None):
        """Consensus (Series of mean, variance by item) or personal (DataFrames items × users)."""
        A, c = self.setup.item_terms()  # (N, M) and s · Var[f_i | f_m] (Eq. 19)
        index = pd.Index(self.data.item_ids, name="item")
        if users is None:
            m, S, s = self._consensus()
            var = ((A @ S) * A).sum(-1) + c / s / self.means.shape[0]
            return (pd.Series((A @ m).numpy(), index=index, name="mean"),
                    pd.Series(var.numpy(), index=index, name="variance"))
        j = self._users(users)
        mean = A @ self.means[j].T
        var = torch.einsum("nm,umk,nk->nu", A, self.covs[j], A) + c[:, None] / self.s[j]
        cols = pd.Index(np.asarray(users).reshape(-1), name="user")
        return pd.DataFrame(mean.numpy(), index=index, columns=cols), pd.DataFrame(var.numpy(), index=index,
                                                                                  columns=cols)
