"""crowdBT–GP: crowdBT consensus scores regressed on item features by a sparse GP — the baseline
of Simpson & Gurevych (2020), Table 3 (after Chen et al. 2013 and Simpson & Gurevych 2018).

Stage 1, crowdBT (Chen et al. 2013): item scores s_i and worker reliabilities η_k,

    s_i ~ N(0, σ_s²),   η_k ~ Beta(α_η, β_η),
    P(worker k says a ≻ b) = η_k σ(s_a − s_b) + (1 − η_k) σ(s_b − s_a)        (σ logistic)

Stage 2: the scores ŝ of the training items are treated as noisy observations of a GP over item
features, ŝ = g(x) + ε, g ~ GP(0, k), ε ~ N(0, σ_n²), sparse with M inducing items (DTC); the
consensus P(a ≻ b) for any items uses the GP's predictive g_a − g_b inside the logistic link, and a
known worker's answer is that probability passed through the worker's reliability, as in stage 1.

Fitting (route ``"map"``): two stages, as the baseline is built.

1. crowdBT by maximum a posteriori: L-BFGS on (s, logit η) over all labels at once (Chen et al.
   2013 update the same posterior online by moment matching; with every label at hand, the MAP of
   the same model is the simpler and deterministic choice).
2. Sparse GP regression (DTC, M inducing items by k-means++) of the MAP scores of the labelled
   items on their features. The signal and noise variances are chosen by the DTC marginal
   likelihood over a grid; the length-scales by the median heuristic (Eq. 26), as for GPPL.

All GP algebra in float64 with Cholesky solves; whitened inducing values u (g_m = L_mm u).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch.special import ndtr

from ...core.ids import distinct_pairs, positions, seen_users
from ...core.posterior import Posterior
from ...data.tensors import label_tensors
from ...errors import ConvergenceWarning, DataError, NumericalError
from ...gp.kernels import Kernel
from ...gp.linalg import DTYPE, cholesky, logdet_from_chol, solve_lower
from ...gp.priors import check_positive, check_priors
from ..gppl.model import GPPL, GPPLSetup


@dataclass
class CrowdBTGP:
    """Parameters: ``score_sd`` σ_s of the score prior; ``reliability_prior`` (α_η, β_η) of the
    Beta prior on each worker's reliability (default (4, 1): most workers mostly right);
    ``n_inducing`` M of the GP; ``kernel``, ``lengthscale``, ``scaled_lengthscale`` as for
    :class:`~crowdzoo.models.GPPL` (median heuristic of Eq. 26 by default)."""

    score_sd: float = 2.0
    reliability_prior: tuple[float, float] = (4.0, 1.0)
    n_inducing: int | None = 200
    kernel: object = "matern32"
    lengthscale: float | None = None
    scaled_lengthscale: bool = False

    def __post_init__(self):
        check_priors(self, {"score_sd": "a positive number (the prior sd σ_s of the scores)"})
        r = self.reliability_prior
        if not isinstance(r, (tuple, list)) or len(r) != 2:
            raise DataError(f"reliability_prior: expected (α_η, β_η), two positive Beta parameters, got "
                            f"{r!r}",
                            arg="reliability_prior")
        for v in r:
            check_positive(v, "reliability_prior", "two positive Beta parameters (α_η, β_η)")


def crowdbt_label_log_lik(s: torch.Tensor, logit_eta: torch.Tensor, a, b, k, y) -> torch.Tensor:
    """log P(y_p | s, η) of each label (the last dimension; s may carry leading draw dimensions);
    η_k = σ(logit_eta_k), the mixture computed by logsumexp so that it stays finite as η → 0 or 1."""
    d = (s[..., a] - s[..., b]) * (2.0 * y - 1.0)  # the said winner's score minus the loser's
    ls = torch.nn.functional.logsigmoid
    right = ls(logit_eta[k]) + ls(d)
    wrong = ls(-logit_eta[k]) + ls(-d)
    return torch.logaddexp(right, wrong)


def crowdbt_log_lik(s: torch.Tensor, logit_eta: torch.Tensor, a, b, k, y) -> torch.Tensor:
    """Σ_p log P(y_p | s, η) of the crowdBT likelihood, vectorised over labels."""
    return crowdbt_label_log_lik(s, logit_eta, a, b, k, y).sum(-1)


def crowdbt_log_prior(s, logit_eta, model: CrowdBTGP) -> torch.Tensor:
    """log N(s; 0, σ_s²) + log Beta(η; α_η, β_η) + log |dη/dlogit| (the density of logit η)."""
    a, b = model.reliability_prior
    ls = torch.nn.functional.logsigmoid
    return (-0.5 * (s / model.score_sd) ** 2).sum() + (a * ls(logit_eta) + b * ls(-logit_eta)).sum()


SIGNAL = (0.25, 0.5, 1.0, 2.0)  # σ_f² as multiples of the scores' variance
NOISE = (0.01, 0.03, 0.1, 0.3, 1.0)  # σ_n² as multiples of the scores' variance


@dataclass(kw_only=True)
class CrowdBTGPPosterior(Posterior):
    """Scores and reliabilities of crowdBT (MAP) and the GP over features fitted to the scores
    (``setup`` is the stage-2 sparse GP)."""

    scores: pd.Series  # MAP ŝ by item id (NaN for items without labels)
    reliability: pd.Series | None  # MAP η by user id
    mu_u: torch.Tensor  # whitened inducing posterior mean (M,)
    S_u: torch.Tensor  # and covariance (M, M)
    signal_var: float
    noise_var: float

    def to_arviz(self, n_draws: int = 500, seed: int = 0):
        """An ArviZ ``DataTree``; see :func:`to_arviz`."""
        return to_arviz(self, n_draws=n_draws, seed=seed)

    def __repr__(self) -> str:
        return (f"CrowdBTGPPosterior(items={self.data.n_items}, pairs={self.data.n_pairs}, "
                f"inducing={self.setup.M})")

    def _X(self, item_features):
        if item_features is None:
            return item_inputs(self.data), self.data.item_ids
        if self.data.item_features.shape[1] == 0:
            raise DataError("item_features: this crowdBT–GP was fitted without item features, so it "
                            "cannot predict for new items")
        X = torch.as_tensor(np.asarray(item_features, dtype=np.float64), dtype=DTYPE)
        return X, np.arange(X.shape[0])

    def project(self, X):
        """B = L_mm⁻¹ K_mx (M, N), g(X) = σ_f (Bᵀ u + √c ε), and the conditional variance c (N,)."""
        B = self.setup._whitened(X)
        return B, (self.setup.kernel.diag(X) - (B * B).sum(0)).clamp_min(0.0)

    def utilities(self, item_features=None):
        """GP predictive mean and variance of the consensus score g of each item (Series)."""
        X, ids = self._X(item_features)
        B, c = self.project(X)
        mean = self.signal_var ** 0.5 * (B.T @ self.mu_u)
        var = self.signal_var * (((B.T @ self.S_u) * B.T).sum(-1) + c)
        index = pd.Index(ids, name="item")
        return (pd.Series(mean.numpy(), index=index, name="mean"),
                pd.Series(var.numpy(), index=index, name="variance"))

    query_users = "workers"  # a query asks a worker, who answers the one consensus by her reliability

    def utility_gaussian(self, user=None, n_draws: int = 1000, seed: int = 0):
        """Mean σ_f Bᵀu (N,) and covariance σ_f² (Bᵀ S_u B + diag c) (N, N) of the training items' scores."""
        B, c = self.project(item_inputs(self.data))
        return (self.signal_var ** 0.5 * (B.T @ self.mu_u),
                self.signal_var * (B.T @ self.S_u @ B + torch.diag(c)))

    def label_link(self, users=None):
        """P(y = 1 | g) = η σ(g) + (1 − η) σ(−g) for the asked worker's reliability η (1 without workers)."""
        if users is None or self.reliability is None:
            return lambda g, rows: torch.sigmoid(g)
        eta = torch.as_tensor(self.reliability.to_numpy()[users], dtype=DTYPE)[:, None]
        return lambda g, rows: eta[rows] * torch.sigmoid(g) + (1 - eta[rows]) * torch.sigmoid(-g)

    def predict_proba(self, a, b, item_features=None, users=None, new_users: str = "error") -> np.ndarray:
        """P(a ≻ b). Without ``users``, the consensus P(g_a > g_b) = E[σ(g_a − g_b)] ≈ Φ(μ / √(8/π + v))
        with the GP's mean μ and variance v of g_a − g_b. With ``users``, what crowdBT says each
        worker k answers (Chen et al. 2013, Eq. 1): η_k p + (1 − η_k)(1 − p) with the worker's MAP
        reliability η_k — a worker who often disagrees with the consensus gets tempered (or flipped)
        predictions, not the consensus's confidence. A user not seen in training is refused
        (``new_users="error"``: a mistyped id should not pass unnoticed); ``"consensus"`` predicts the
        consensus, ``"prior"`` a new worker's prior predictive, η̄ p + (1 − η̄)(1 − p) with η̄ = α_η /
        (α_η + β_η) the prior mean of the Beta(α_η, β_η) reliability."""
        p = self._consensus(a, b, item_features)
        if users is None or self.reliability is None:
            return p
        _, pos = seen_users(users, self.data.user_ids, p.shape[0], new_users)
        al, be = self.model.reliability_prior
        eta_new = al / (al + be) if new_users == "prior" else 1.0
        pos = pos.numpy()
        eta = np.where(pos >= 0, self.reliability.to_numpy()[np.maximum(pos, 0)], eta_new)
        return eta * p + (1.0 - eta) * (1.0 - p)

    def _consensus(self, a, b, item_features=None) -> np.ndarray:
        X, ids = self._X(item_features)
        ids_a = a
        a = torch.as_tensor(positions("a", a, ids, hint=False))
        b = torch.as_tensor(positions("b", b, ids, hint=False))
        distinct_pairs(a, b, ids_a)
        d, c = self.setup.pair_terms(a, b, X)  # whitened rows and conditional variance (Eq. 19)
        mean = self.signal_var ** 0.5 * (d @ self.mu_u)
        var = self.signal_var * (((d @ self.S_u) * d).sum(-1) + c)
        return ndtr(mean / torch.sqrt(8.0 / math.pi + var)).numpy()


def fit_map(model: CrowdBTGP, data, seed: int = 0, max_iter: int = 200,
            progress_bar=None) -> CrowdBTGPPosterior:
    """Fit crowdBT–GP to ``data`` (users are the workers; without users one reliable worker)."""
    if not isinstance(model, CrowdBTGP):
        raise DataError(f"model: expected CrowdBTGP, got {type(model).__name__}")
    a, b, y = label_tensors(data)
    k = torch.from_numpy(data.users).long() if data.users is not None else torch.zeros_like(a)
    K = int(k.max()) + 1
    N = data.n_items
    # stage 1: crowdBT MAP, all labels at once
    s = torch.zeros(N, dtype=DTYPE, requires_grad=True)
    al, be = model.reliability_prior
    logit_eta = torch.full((K,), math.log(al / be), dtype=DTYPE, requires_grad=True)
    opt = torch.optim.LBFGS([s, logit_eta], max_iter=max_iter, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-7, tolerance_change=1e-10)

    losses = []

    def closure():
        opt.zero_grad()
        loss = -(crowdbt_log_lik(s, logit_eta, a, b, k, y) + crowdbt_log_prior(s, logit_eta, model))
        loss.backward()
        losses.append(float(loss.detach()))
        return loss

    loss = opt.step(closure)
    # converged: L-BFGS stopped on its tolerances (gradient or change), not on max_iter / max_eval
    grad = torch.cat([s.grad.reshape(-1), logit_eta.grad.reshape(-1)])
    converged = float(grad.abs().max()) <= 1e-5 or (
        len(losses) >= 2 and abs(losses[-1] - losses[-2]) <= 1e-10 * max(1.0, abs(losses[-1])))
    if not torch.isfinite(loss):
        raise NumericalError("crowdBT: the MAP objective is NaN. Try: a smaller score_sd or a "
                             "stronger reliability_prior.")
    if not converged:
        warnings.warn(ConvergenceWarning(
            f"crowdBT MAP: L-BFGS stopped on its budget ({{max_iter={max_iter}}} iterations, "
            f"{int(1.25 * max_iter)} evaluations) without meeting its tolerances (last loss "
            f"{losses[-1]:.6g}). Try a larger {{max_iter}}.", settings=("max_iter",)), stacklevel=3)
    s_hat = s.detach()
    eta = torch.sigmoid(logit_eta.detach())
    seen = torch.zeros(N, dtype=torch.bool)
    seen[a] = True
    seen[b] = True
    # stage 2: DTC regression of ŝ on the features of the labelled items
    gp = GPPL(n_inducing=model.n_inducing, kernel=model.kernel, lengthscale=model.lengthscale,
              scaled_lengthscale=bool(model.scaled_lengthscale))
    X_seen = item_inputs(data)[seen]
    if data.item_features.shape[1] == 0:  # no features: independent items (identity kernel on the row)
        setup = GPPLSetup.build(Kernel("identity", torch.ones(1, dtype=DTYPE)), X_seen, X_seen, gp.jitter,
                                exact=True)
    else:
        setup = gp.setup_features(X_seen, seed=seed)
    B = setup.B  # (M, N_seen)
    t = s_hat[seen] - s_hat[seen].mean()
    v0 = float(t.var()) if t.numel() > 1 else 1.0
    BBt, Bt = B @ B.T, B @ t
    best = None
    for sf in SIGNAL:
        for sn in NOISE:
            lml, fit = _dtc(BBt, Bt, t @ t, t.numel(), sf * v0, sn * v0)
            if best is None or lml > best[0]:
                best = (lml, fit, sf * v0, sn * v0)
    _, (mu_u, S_u), signal_var, noise_var = best
    score_index = pd.Index(data.item_ids, name="item")
    scores = pd.Series(np.where(seen.numpy(), s_hat.numpy(), np.nan), index=score_index, name="score")
    rel = None if data.users is None else pd.Series(eta.numpy(), index=pd.Index(data.user_ids, name="user"),
                                                    name="reliability")
    return CrowdBTGPPosterior(model=model, setup=setup, data=data, method="map", scores=scores,
                              reliability=rel, mu_u=mu_u, S_u=S_u, signal_var=signal_var,
                              noise_var=noise_var, trace={"loss": np.asarray(losses)},
                              settings=dict(seed=seed, max_iter=max_iter, converged=bool(converged),
                                            signal_var=signal_var, noise_var=noise_var))


def item_inputs(data) -> torch.Tensor:
    """The GP's inputs for the data's items: their features, or their row index when they have none."""
    if data.item_features.shape[1] == 0:
        return torch.arange(data.n_items, dtype=DTYPE)[:, None]
    return torch.as_tensor(data.item_features, dtype=DTYPE)


def _dtc(BBt, Bt, tt, N, sf2, sn2):
    """DTC log marginal likelihood of t ~ N(0, σ_f² BᵀB + σ_n² I) and the whitened posterior
    N(μ_u, S_u) of u, via A = I + (σ_f²/σ_n²) B Bᵀ (Woodbury); takes B Bᵀ, B t, tᵀt and N."""
    r = sf2 / sn2
    A = torch.eye(BBt.shape[0], dtype=DTYPE) + r * BBt
    L_A = cholesky(A, what="I + σ_f²/σ_n² B Bᵀ (crowdBT–GP regression)")
    w = solve_lower(L_A, Bt[:, None])[:, 0]
    quad = (tt - r * (w @ w)) / sn2
    logdet = N * math.log(sn2) + logdet_from_chol(L_A)
    lml = float(-0.5 * (quad + logdet + N * math.log(2 * math.pi)))
    S_u = torch.cholesky_inverse(L_A)
    mu_u = (sf2 ** 0.5 / sn2) * (S_u @ Bt)
    return lml, (mu_u, S_u)


def to_arviz(post, n_draws: int = 500, seed: int = 0):
    """crowdBT–GP: posterior g (item), draws of the consensus score from the stage-2 GP
    regression, and eta (user), the stage-1 MAP reliabilities repeated in every draw (a point
    estimate: its sd is 0, and its variable attrs say so). Log-likelihood and replicated labels per
    label use the crowdBT likelihood η σ(g_a − g_b) + (1 − η) σ(g_b − g_a) with these g and η.
    The two-stage fit is not a joint posterior, so the checks read it as an approximation."""
    from ...diagnostics.arviz import chain_shape, finish  # ArviZ only when asked

    d = post.data
    gen = torch.Generator().manual_seed(seed)
    B, c = post.project(item_inputs(d))  # (M, N), (N,)
    L_u = cholesky(post.S_u, what="S_u (crowdBT–GP inducing posterior)")
    u = post.mu_u + torch.randn(n_draws, post.mu_u.shape[0], dtype=B.dtype, generator=gen) @ L_u.T
    eps = torch.randn(n_draws, B.shape[1], dtype=B.dtype, generator=gen)
    gdraw = post.signal_var ** 0.5 * (u @ B + torch.sqrt(c) * eps)  # (n, N)
    a, b = torch.as_tensor(d.a), torch.as_tensor(d.b)
    users = d.users is not None
    k = torch.as_tensor(d.users) if users else torch.zeros_like(a)
    eta = torch.tensor(post.reliability.to_numpy() if users else np.ones(1), dtype=B.dtype)
    loglik = crowdbt_label_log_lik(gdraw, torch.logit(eta), a, b, k, torch.as_tensor(d.y, dtype=B.dtype))
    p1 = crowdbt_label_log_lik(gdraw, torch.logit(eta), a, b, k, torch.ones(a.shape, dtype=B.dtype)).exp()
    gen2 = torch.Generator().manual_seed(seed + 1)
    y_rep = (torch.rand(p1.shape, generator=gen2, dtype=p1.dtype) < p1).to(torch.int64)
    coords = {"item": np.asarray(d.item_ids), "pair": np.arange(d.n_pairs)}
    dims = {"g": ["item"], "y": ["pair"]}
    posterior = {"g": chain_shape(gdraw)}
    if users:
        coords["user"] = np.asarray(d.user_ids)
        dims["eta"] = ["user"]
        posterior["eta"] = chain_shape(eta.expand(n_draws, -1))
    groups = {"posterior": posterior, "posterior_predictive": {"y": chain_shape(y_rep)},
              "log_likelihood": {"y": chain_shape(loglik)}, "observed_data": {"y": d.y.astype(np.int64)}}
    dt = finish(post, groups, coords, dims, "pair", identified="g")
    if users:
        dt.posterior["eta"].attrs["estimate"] = "MAP (crowdBT stage 1), repeated in every draw"
    return dt
