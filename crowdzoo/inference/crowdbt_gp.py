"""Fitting crowdBT–GP (:mod:`crowdzoo.models.crowdbt_gp`): two stages, as the baseline is built.

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
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch.special import ndtr

from ..errors import ConvergenceWarning, DataError, NumericalError
from ..linalg import DTYPE, cholesky, logdet_from_chol, solve_lower
from ..lookup import positions
from ..models.crowdbt_gp import CrowdBTGP, crowdbt_log_lik, crowdbt_log_prior
from ..models.gppl import GPPL
from ._common import label_tensors

SIGNAL = (0.25, 0.5, 1.0, 2.0)  # σ_f² as multiples of the scores' variance
NOISE = (0.01, 0.03, 0.1, 0.3, 1.0)  # σ_n² as multiples of the scores' variance


@dataclass
class CrowdBTGPPosterior:
    """Scores and reliabilities of crowdBT (MAP) and the GP over features fitted to the scores."""

    model: CrowdBTGP
    data: object
    scores: pd.Series  # MAP ŝ by item id (NaN for items without labels)
    reliability: pd.Series | None  # MAP η by user id
    kernel: object
    Z: torch.Tensor
    L_mm: torch.Tensor
    mu_u: torch.Tensor  # whitened inducing posterior mean (M,)
    S_u: torch.Tensor  # and covariance (M, M)
    signal_var: float
    noise_var: float
    method: str = "map+gp"
    settings: dict = field(default_factory=dict)
    trace: dict = field(default_factory=dict)  # {"loss": the MAP objective per L-BFGS evaluation}
    sample_stats: dict = field(default_factory=dict)  # none: no sampler

    def to_arviz(self, n_draws: int = 500, seed: int = 0):
        """An ArviZ ``DataTree``; see :func:`crowdzoo.diagnostics.arviz.crowdbt_to_arviz`."""
        from ..diagnostics.arviz import crowdbt_to_arviz

        return crowdbt_to_arviz(self, n_draws=n_draws, seed=seed)

    def _X(self, item_features):
        if item_features is None:
            return torch.as_tensor(self.data.item_features, dtype=DTYPE), self.data.item_ids
        X = torch.as_tensor(np.asarray(item_features, dtype=np.float64), dtype=DTYPE)
        return X, np.arange(X.shape[0])

    def project(self, X):
        """B = L_mm⁻¹ K_mx (M, N), g(X) = σ_f (Bᵀ u + √c ε), and the conditional variance c (N,)."""
        B = solve_lower(self.L_mm, self.kernel(self.Z, X))
        return B, (1.0 - (B * B).sum(0)).clamp_min(0.0)

    def utilities(self, item_features=None):
        """GP predictive mean and variance of the consensus score g of each item (Series)."""
        X, ids = self._X(item_features)
        B, c = self.project(X)
        mean = self.signal_var ** 0.5 * (B.T @ self.mu_u)
        var = self.signal_var * (((B.T @ self.S_u) * B.T).sum(-1) + c)
        index = pd.Index(ids, name="item")
        return (pd.Series(mean.numpy(), index=index, name="mean"),
                pd.Series(var.numpy(), index=index, name="variance"))

    def predict_proba(self, a, b, item_features=None, users=None) -> np.ndarray:
        """Consensus P(a ≻ b) = E[σ(g_a − g_b)] ≈ Φ(μ / √(8/π + v)) with the GP's mean μ and
        variance v of g_a − g_b. ``users`` is accepted and ignored (crowdBT–GP has no personal
        preferences)."""
        X, ids = self._X(item_features)
        a = torch.as_tensor(positions("a", a, ids, hint=False))
        b = torch.as_tensor(positions("b", b, ids, hint=False))
        d = solve_lower(self.L_mm, self.kernel(self.Z, X[a]) - self.kernel(self.Z, X[b])).T
        mean = self.signal_var ** 0.5 * (d @ self.mu_u)
        # conditional variance of g_a − g_b given the inducing values (k(x, x) = 1)
        c = (2.0 - 2.0 * self.kernel.pairs(X[a], X[b]) - (d * d).sum(-1)).clamp_min(0.0)
        var = self.signal_var * (((d @ self.S_u) * d).sum(-1) + c)
        return ndtr(mean / torch.sqrt(8.0 / math.pi + var)).numpy()


def fit_crowdbt_gp(model: CrowdBTGP, data, seed: int = 0, max_iter: int = 200,
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
        warnings.warn(f"crowdBT MAP: L-BFGS stopped on its budget (max_iter={max_iter} iterations, "
                      f"{int(1.25 * max_iter)} evaluations) without meeting its tolerances (last loss "
                      f"{losses[-1]:.6g}). Try a larger max_iter.", ConvergenceWarning, stacklevel=3)
    s_hat = s.detach()
    eta = torch.sigmoid(logit_eta.detach())
    seen = torch.zeros(N, dtype=torch.bool)
    seen[a] = True
    seen[b] = True
    # stage 2: DTC regression of ŝ on the features of the labelled items
    gp = GPPL(n_inducing=model.n_inducing, kernel=model.kernel, lengthscale=model.lengthscale,
              scaled_lengthscale=bool(model.scaled_lengthscale))
    X_seen = data.item_features[seen.numpy()]
    setup = gp.setup(X_seen, seed=seed)
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
    return CrowdBTGPPosterior(model=model, data=data, scores=scores, reliability=rel, kernel=setup.kernel,
                              Z=setup.Z, L_mm=setup.L_mm, mu_u=mu_u, S_u=S_u, signal_var=signal_var,
                              noise_var=noise_var, trace={"loss": np.asarray(losses)},
                              settings=dict(seed=seed, max_iter=max_iter, converged=bool(converged),
                                            signal_var=signal_var, noise_var=noise_var))


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
