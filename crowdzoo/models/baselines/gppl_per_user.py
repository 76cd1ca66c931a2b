"""GPPL-per-user: an independent GPPL for every user (the baseline of Simpson & Gurevych 2020, §5).

Generative story, for each user j independently (Eq. 4 per user, sparse as in §4.2):

    s_j   ~ Gamma(α₀, β₀)
    f_m,j ~ N(0, K_mm / s_j)                    user j's utilities at the M inducing items
    y_p   ~ Bernoulli(Φ(f_j,a − f_j,b))          for every label p of user j = u_p

No information is shared between users. The consensus of the crowd is the mean of the users'
utilities (as the paper defines it for this baseline). The item side (kernel, inducing items)
is GPPL's, shared by all users; the fit is batched over users, not a loop over them
(below).

Fitting (natural-gradient VI, batched over users): every user j has q(f_m,j) = N(m_j, S_j) and
q(s_j) = Gamma(α_j, β_j) (Eq. 12–15 per user). All users are updated at once: each label adds its
rank-one term to its own user's natural parameters (an ``index_add`` over labels, in chunks), then
one batched Cholesky solves every user. Steps are full-batch — each user's data are few, so no user
is left out of an iteration — with the exact expected probit log-likelihood by Gauss–Hermite
quadrature (the ``"exact"`` natgrad of GPPL; a label of weight w, ``PairwiseData.weights``, has its
derivatives and its term of the bound times w, as w copies of it), run by the shared loop of
:mod:`crowdzoo.inference.natgrad` as the algorithm :func:`init`, :func:`step`, :func:`bound` on a
:class:`Problem`; the bound is Eq. 30 summed over users. Memory is O(U M²) plus a
chunk of labels.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch

from ...core.ids import by_rows, distinct_pairs, positions, seen_users
from ...core.posterior import Posterior
from ...data.tensors import label_tensors, user_tensor, weight_tensor
from ...errors import DataError
from ...gp import natural
from ...gp.conjugate import gamma_moments, kl_gamma, q_s, require_gamma, scale_rate
from ...gp.linalg import DTYPE, cho_solve, cholesky, gamma_draws, logdet_from_chol
from ...gp.natural import Gaussian
from ...gp.probit import expected_log_probit, predictive_prob
from ...inference import natgrad as loop
from ..gppl.model import GPPL

_CHUNK = 2**20
WHAT = "S⁻¹ of a user"


@dataclass
class GPPLPerUser(GPPL):
    """One GPPL per user; parameters as for :class:`~crowdzoo.models.gppl.model.GPPL` (the same
    prior for every user), without the item residual (the paper's baseline has none) and without the
    order effect."""

    item_residual: bool | str = False

    def __post_init__(self):
        if self.item_residual is not False:
            raise DataError("item_residual: GPPL per user has no item residual (the paper's baseline); "
                            "leave it False, or fit gppl or crowdgppl for one", arg="item_residual")
        if self.order_effect is not False:
            raise DataError("order_effect: GPPL per user has no order effect (the paper's baseline); leave "
                            "it False, or fit gppl, crowdgppl or bradley-terry for one", arg="order_effect")
        super().__post_init__()


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


class Problem(NamedTuple):
    """What the fit holds fixed: every label's pair rows A_a − A_b (P, M), conditional variance c,
    user position j and outcome y; K_mm⁻¹, ln|K_mm|; the Gamma prior (α₀, β₀) of every s_j; each
    label's weight ``w`` (None: every label 1)."""

    rows: torch.Tensor
    c: torch.Tensor
    j: torch.Tensor
    y: torch.Tensor
    n_users: int
    K_inv: torch.Tensor
    logdet_K: torch.Tensor
    alpha0: float
    beta0: float
    n_gh: int = 20
    w: torch.Tensor | None = None


def _expected(p: Problem, y, mu, var, idx):
    """Each label's expected log-likelihood and its derivatives (Gauss–Hermite), times its weight."""
    out = expected_log_probit(y, mu, var, p.n_gh)
    return out if p.w is None else tuple(x * p.w[idx] for x in out)


class State(NamedTuple):
    """Every user's q(f_m,j) (one batched block, (U, M, M)) and the Gammas q(s_j) (U,)."""

    q: Gaussian
    shape: torch.Tensor
    rate: torch.Tensor


class Info(NamedTuple):
    """What a step did: its step size ρ_i and every user's E[s_j] after it."""

    rho: float
    s: torch.Tensor


def _marginals(state: State, p: Problem, idx):
    """Mean and variance of f_j,a − f_j,b under the label's user's q (Eq. 14 per user)."""
    Es = state.shape / state.rate
    r, jj = p.rows[idx], p.j[idx]
    mu = (r * state.q.m[jj]).sum(-1)
    var = ((r[:, None, :] @ state.q.S[jj])[:, 0, :] * r).sum(-1) + p.c[idx] / Es[jj]
    return mu, var


def init(problem: Problem, gen: torch.Generator) -> State:
    """Every user's q at the prior, E[s_j] = α₀/β₀."""
    p = problem
    U, M = p.n_users, p.K_inv.shape[0]
    Lam = (p.alpha0 / p.beta0) * p.K_inv.expand(U, M, M).clone()
    q = natural.gaussian(Lam, torch.zeros(U, M, dtype=DTYPE), WHAT)
    return State(q, torch.full((U,), p.alpha0, dtype=DTYPE), torch.full((U,), p.beta0, dtype=DTYPE))


def step(state: State, batch: loop.Batch, problem: Problem) -> tuple[State, Info]:
    """One natural-gradient step of every user's q(f_m,j) on every label (the exact likelihood by
    Gauss–Hermite quadrature; Eq. 17–18 per user), then every q(s_j) (Eq. 15) with the likelihood's
    pull through c / E[s_j] (g_v from this iteration's start, the same at the fixed point)."""
    p, rho = problem, batch.rho
    mu, var = _marginals(state, p, batch.idx)  # full batches: idx is every label
    _, g_mu, g_v = _expected(p, p.y, mu, var, batch.idx)
    Es = state.shape / state.rate
    Lam_lik, eta_lik = _accumulate(p.n_users, p.j, p.rows, -2.0 * g_v, g_mu - 2.0 * g_v * mu)
    q = natural.step(state.q, Es[:, None, None] * p.K_inv, Lam_lik, eta_lik, rho, WHAT)
    shape, rate = q_s(p.alpha0, p.beta0, p.K_inv.shape[0], natural.second(q, p.K_inv))  # Eq. 15 per user
    rate = scale_rate(rate, shape, torch.zeros(p.n_users, dtype=DTYPE).index_add_(0, p.j, -g_v * p.c))
    return State(q, shape, rate), Info(rho, shape / rate)


def bound(state: State, idx, scale: float, problem: Problem) -> float:
    """Eq. 30 summed over users, the likelihood term of the labels ``idx`` times ``scale``."""
    p = problem
    ell, _, _ = _expected(p, p.y[idx], *_marginals(state, p, idx), idx)
    Es, Elog = gamma_moments(state.shape, state.rate)
    kl_f = natural.kl(state.q, p.K_inv, p.logdet_K, Es, Elog, WHAT)
    return float(scale * ell.sum() - kl_f.sum() - kl_gamma(state.shape, state.rate, p.alpha0, p.beta0).sum())


def fit_natgrad(model, data, seed: int = 0, delay: float = 1.0, forgetting_rate: float = 0.9,
                max_iter: int = 300, min_iter: int = 10, tol: float = 1e-4, eval_every: int = 1,
                n_gh: int = 20, progress_bar: bool | None = None, setup=None, resume=None,
                checkpoint=None, checkpoint_every: int = 0, callback=None):
    """Fit one GPPL per user (module docstring); returns a :class:`PerUserPosterior`."""
    alpha0, beta0 = require_gamma(model.prior_s(), "s_prior")
    resume, setup = loop.resume_setup(resume, setup, lambda: model.setup(data, seed=seed))
    a, b, y = label_tensors(data)
    rows, c = setup.pair_rows(a, b)
    problem = Problem(rows, c, user_tensor(data), y, data.n_users,
                      cho_solve(setup.L_mm, torch.eye(setup.M, dtype=DTYPE)), logdet_from_chol(setup.L_mm),
                      alpha0, beta0, n_gh, weight_tensor(data))
    P = a.shape[0]
    settings = loop.Settings(batch_size=P, delay=delay, forgetting_rate=forgetting_rate, max_iter=max_iter,
                             min_iter=min_iter, tol=tol, eval_every=eval_every, eval_size=P,
                             progress_bar=progress_bar, checkpoint=checkpoint,
                             checkpoint_every=checkpoint_every, callback=callback)
    res = loop.run(loop.algorithm(init, step, bound, problem, P), settings, seed=seed,
                   what="natgrad GPPL-per-user",
                   advice="a larger {delay} ε or {forgetting_rate} r (smaller steps)",
                   advice_settings=("delay", "forgetting_rate"),
                   resume=resume, meta=dict(model=model, method="natgrad"), setup=setup)
    q = res.state.q
    return PerUserPosterior(model=model, setup=setup, data=data, method="natgrad", means=q.m, covs=q.S,
                            s_shape=res.state.shape, s_rate=res.state.rate,
                            trace={"bound": np.asarray(res.stop.bounds),
                                   "bound_iteration": np.asarray(res.stop.iterations)},
                            settings=res.settings, checkpoint=res.checkpoint)


@dataclass(kw_only=True)
class PerUserPosterior(Posterior):
    """q(f_m,j) = N(``means[j]``, ``covs[j]``) and q(s_j) = Gamma(``s_shape[j]``, ``s_rate[j]``),
    E[s_j] = ``s[j]``, for every user j."""

    means: torch.Tensor
    covs: torch.Tensor
    s_shape: torch.Tensor
    s_rate: torch.Tensor

    @property
    def s(self) -> torch.Tensor:
        """E[s_j] of every user."""
        return self.s_shape / self.s_rate

    def to_arviz(self, n_draws: int = 500, seed: int = 0):
        """An ArviZ ``DataTree``; see :func:`to_arviz`."""
        return to_arviz(self, n_draws=n_draws, seed=seed)

    def __repr__(self) -> str:
        return (f"PerUserPosterior(users={self.means.shape[0]}, items={self.data.n_items}, "
                f"pairs={self.data.n_pairs}, inducing={self.setup.M})")

    def _rows(self, ids):
        return positions("a, b", ids, self.data.item_ids, hint=False)

    def _users(self, users):
        return positions("users", users, self.data.user_ids, what="user", hint=False)

    def _consensus(self):
        """Mean of the users' utilities at the inducing items: N(mean m_j, Σ S_j / U²)."""
        U = self.means.shape[0]
        return self.means.mean(0), self.covs.sum(0) / U**2, 1.0 / (self.s.reciprocal().mean())

    query_users = "personal"  # a query asks one user about her own GPPL (active learning)

    def utility_gaussian(self, user=None, n_draws: int = 1000, seed: int = 0):
        """Mean A m_j (N,) and covariance A S_j Aᵀ + diag(c / s_j) (N, N) of user j's utilities at
        the training items (Eq. 19), or of the consensus for user=None."""
        A, c = self.setup.item_terms()
        if user is None:
            m, S, s = self._consensus()
            return A @ m, A @ S @ A.T + torch.diag(c / s / self.means.shape[0])
        j = int(self._users([user])[0])
        return A @ self.means[j], A @ self.covs[j] @ A.T + torch.diag(c / self.s[j])

    def latent_moments(self, a, b, users=None):
        """Mean and variance (1, n) of f_a − f_b under each pair's user's GPPL (or the consensus
        for users=None): what :func:`predict_proba` and the query strategies of
        :mod:`crowdzoo.active` use."""
        a, b = self._rows(a), self._rows(b)
        rows, c = self.setup.pair_rows(a, b)
        if users is None:
            m, S, s = self._consensus()
            mu = rows @ m
            var = ((rows @ S) * rows).sum(-1) + c / s / self.means.shape[0]
        else:
            j = self._users(users)
            mu = (rows * self.means[j]).sum(-1)
            var = ((rows[:, None, :] @ self.covs[j])[:, 0, :] * rows).sum(-1) + c / self.s[j]
        return mu[None], var[None]

    def predict_proba(self, a, b, users=None, new_users: str = "error") -> np.ndarray:
        """P(a ≻ b): each pair's user's own GPPL, or the consensus (mean utility) for users=None. A
        user id not seen in training is refused (``new_users="error"``) or gets the consensus
        (``"consensus"``); the users share nothing, so a new user's prior predictive is ½ and
        ``"prior"`` is refused."""
        distinct_pairs(self._rows(a), self._rows(b), a)
        if users is None:
            return predictive_prob(*self.latent_moments(a, b, None))[0].numpy()
        a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
        ids, pos = seen_users(users, self.data.user_ids, a.shape[0], new_users, prior=(
            "GPPL per user shares nothing between users, so a new user's prior predictive is ½ for every "
            "pair; use new_users='consensus'"))
        return by_rows(pos, lambda r: predictive_prob(*self.latent_moments(a[r], b[r], ids[r]))[0].numpy(),
                       lambda r: predictive_prob(*self.latent_moments(a[r], b[r], None))[0].numpy())

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


_MAX_NUMBERS = 2**24  # per_user_to_arviz keeps f (draw, user, item) only up to this size


def to_arviz(post, n_draws: int = 500, seed: int = 0):
    """GPPL-per-user: posterior f (user, item), each user's utilities, s (user) and f_mean
    (item), the users' mean utility (the consensus this baseline predicts with); log-likelihood
    and replicated labels per label from the label's user's f. Draws of f_m,j ~ N(m_j, S_j) and
    s_j ~ q(s_j) map to the items as for GPPL (Eq. 19, the sparse conditional added per item),
    a block of users at a time; f itself is kept only while draws × users × items ≤ 2²⁴ (the root
    attribute ``f_omitted`` says when it is not)."""
    from ...diagnostics.arviz import chain_shape, finish, probit_labels  # ArviZ only when asked

    d, st = post.data, post.setup
    U, N, n = post.means.shape[0], st.X.shape[0], int(n_draws)
    g = torch.Generator().manual_seed(seed)
    L = cholesky(post.covs, what="S_j, a user's posterior covariance")
    s = gamma_draws(post.s_shape, post.s_rate, n, g)  # (n, U)
    A, c = st.item_terms()
    A_T = A.T  # (M, N)
    a, b, j = (torch.as_tensor(x) for x in (d.a, d.b, d.users))
    keep = n * U * N <= _MAX_NUMBERS
    z = torch.empty(n, d.n_pairs, dtype=A_T.dtype)
    f_sum = torch.zeros(n, N, dtype=A_T.dtype)
    blocks = []
    step = max(1, 2**22 // (n * N))
    for lo in range(0, U, step):  # blocks of users bound memory; vectorised within
        hi = min(U, lo + step)
        eps = torch.randn(n, hi - lo, st.M, 1, dtype=A_T.dtype, generator=g)
        f = (post.means[lo:hi] + (L[lo:hi] @ eps)[..., 0]) @ A_T  # (n, users, N)
        f = f + torch.randn(f.shape, dtype=f.dtype, generator=g) * torch.sqrt(c / s[:, lo:hi, None])
        f_sum += f.sum(1)
        rows = torch.nonzero((j >= lo) & (j < hi)).ravel()
        jj = j[rows] - lo
        z[:, rows] = f[:, jj, a[rows]] - f[:, jj, b[rows]]
        if keep:
            blocks.append(f)
    loglik, y_rep = probit_labels(z, d.y, seed)
    coords = {"item": np.asarray(d.item_ids), "user": np.asarray(d.user_ids), "pair": np.arange(d.n_pairs)}
    dims = {"f": ["user", "item"], "f_mean": ["item"], "s": ["user"], "y": ["pair"]}
    posterior = {"f_mean": chain_shape(f_sum / U), "s": chain_shape(s)}
    if keep:
        posterior["f"] = chain_shape(torch.cat(blocks, 1))
    groups = {"posterior": posterior, "posterior_predictive": {"y": chain_shape(y_rep)},
              "log_likelihood": {"y": chain_shape(loglik)},
              "observed_data": {"y": d.y.astype(np.int64)}}
    dt = finish(post, groups, coords, dims, "pair", identified="f_mean s")
    if not keep:
        dt.attrs["f_omitted"] = f"draws × users × items = {n * U * N} > 2^24: f left out"
    return dt
