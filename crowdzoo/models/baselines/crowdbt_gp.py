"""crowdBT–GP: crowdBT consensus scores regressed on item features by a sparse GP — the baseline
of Simpson & Gurevych (2020), Table 3 (after Chen et al. 2013 and Simpson & Gurevych 2018).

Stage 1, crowdBT (Chen et al. 2013): item scores s_i and worker reliabilities η_k,

    s_i ~ N(0, σ_s²),   η_k ~ π Beta(α_η, β_η) + (1 − π) Beta(1, 1),
    P(worker k says a ≻ b) = η_k σ(s_a − s_b) + (1 − η_k) σ(s_b − s_a)        (σ logistic)

Chen et al. put one Beta(α_η, β_η) on every η_k (π = 1, :meth:`CrowdBTGP.paper`). The default is a
mixture: a share π of reliable workers whose η is near 1, and the rest anywhere in [0, 1] (a worker
who flips her answers or guesses). One Beta cannot say both: the MAP of logit η under Beta(α, β) with
little data sits at α/(α + β), so a prior loose enough below its mean to let flipped workers go (Beta(8,
½)) parks every honest worker with a few dozen labels at η ≈ 0.95, and tempers each prediction for
her as if one answer in twenty were flipped.

Stage 2: the scores ŝ of the training items are treated as noisy observations of a GP over item
features, ŝ = g(x) + ε, g ~ GP(0, k), ε ~ N(0, σ_n²), sparse with M inducing items (DTC); the
consensus P(a ≻ b) for any items uses the GP's predictive g_a − g_b inside the logistic link, and a
known worker's answer is that probability passed through the worker's reliability, as in stage 1.

Fitting (route ``"map"``): two stages, as the baseline is built.

1. crowdBT by maximum a posteriori: L-BFGS on (s, logit η) over all labels at once (Chen et al.
   2013 update the same posterior online by moment matching; with every label at hand, the MAP of
   the same model is the simpler and deterministic choice).
2. Sparse GP regression (DTC, M inducing items by k-means++) of the scores of the labelled items
   on their features. The paper's (:meth:`CrowdBTGP.paper`): the MAP scores as targets, σ_f², σ_n²
   by the DTC marginal likelihood over a grid, length-scales by the median heuristic (Eq. 26), the
   consensus g alone. The defaults: each score's own evidence t̃_i ~ N(s_i, 1/λ_i) as target
   (:func:`score_evidence`), s_i = g(x_i) + r_i with an item residual r_i ~ N(0, σ_r²), ARD ℓ, σ_f²
   and σ_r² by L-BFGS on the marginal likelihood (:func:`_learn`), and a labelled item predicted
   from g and its own evidence (:class:`CrowdBTGPPosterior`); ties say nothing of η.

A label of weight w (``PairwiseData.weights``) counts as w copies of it: its log-likelihood in stage 1
and its curvature in each score's evidence are multiplied by w.

All GP algebra in float64 with Cholesky solves; whitened inducing values u (g_m = L_mm u).
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ...core.ids import distinct_pairs, positions, seen_users
from ...core.posterior import Posterior
from ...data.tensors import label_tensors, weight_tensor
from ...errors import ConvergenceWarning, DataError, NumericalError
from ...gp.kernels import Kernel
from ...gp.learn import ARDGP, learns_by_default
from ...gp.linalg import DTYPE, cholesky, logdet_from_chol, solve_lower
from ...gp.priors import check_positive, check_priors
from ...gp.probit import gauss_hermite
from ..gppl.model import GPPL, GPPLSetup


@dataclass
class CrowdBTGP:
    """Parameters: ``score_sd`` σ_s of the score prior; ``reliability_prior`` (α_η, β_η) of the
    Beta prior on a reliable worker's reliability and ``reliable_share`` π, the prior share of
    reliable workers: η_k ~ π Beta(α_η, β_η) + (1 − π) Beta(1, 1) (default π = 0.9 and Beta(50,
    1/20), mode of logit η at 0.999: a worker is taken as reliable until her labels say otherwise;
    π = 1 is one Beta, as Chen et al. 2013 have it); ``n_inducing`` M of the GP; ``kernel``,
    ``lengthscale``, ``scaled_lengthscale`` as for :class:`~crowdzoo.models.GPPL` (median heuristic
    of Eq. 26 by default)."""

    score_sd: float = 2.0
    reliability_prior: tuple[float, float] = (50.0, 0.05)
    reliable_share: float = 0.9
    n_inducing: int | None = 200
    kernel: object = "matern32"
    lengthscale: float | None = None
    scaled_lengthscale: bool = False
    learn_kernel: bool = True
    item_posterior: bool = True
    tie_reliability: bool = False
    lengthscale_prior_sd: float = 2.0

    @classmethod
    def paper(cls, **kwargs) -> CrowdBTGP:
        """The baseline as Simpson & Gurevych (2020) run it: length-scales by the median heuristic
        (Eq. 26), σ_f² and σ_n² over the grid, the consensus g alone, ties counted as two answers of
        the worker, reliabilities under one Beta(4, 1) (``reliability_prior=(4, 1), reliable_share=1,
        learn_kernel=False, item_posterior=False, tie_reliability=True``); ``kwargs`` set any field."""
        return cls(**{"reliability_prior": (4.0, 1.0), "reliable_share": 1.0, "learn_kernel": False,
                      "item_posterior": False, "tie_reliability": True, **kwargs})

    def __post_init__(self):
        check_priors(self, {"score_sd": "a positive number (the prior sd σ_s of the scores)"})
        r = self.reliability_prior
        if not isinstance(r, (tuple, list)) or len(r) != 2:
            raise DataError(f"reliability_prior: expected (α_η, β_η), two positive Beta parameters, got "
                            f"{r!r}",
                            arg="reliability_prior")
        for v in r:
            check_positive(v, "reliability_prior", "two positive Beta parameters (α_η, β_η)")
        pi = self.reliable_share
        if isinstance(pi, bool) or not isinstance(pi, (int, float)) or not 0.0 < pi <= 1.0:
            raise DataError(f"reliable_share: expected a number in (0, 1] (the prior share π of reliable "
                            f"workers), got {pi!r}", arg="reliable_share")
        check_positive(self.lengthscale_prior_sd, "lengthscale_prior_sd",
                       "a positive number (the sd of log ℓ_d about the median heuristic)")


def crowdbt_label_log_lik(s: torch.Tensor, logit_eta: torch.Tensor, a, b, k, y,
                          tie: torch.Tensor | None = None) -> torch.Tensor:
    """log P(y_p | s, η) of each label (the last dimension; s may carry leading draw dimensions);
    η_k = σ(logit_eta_k), the mixture computed by logsumexp so that it stays finite as η → 0 or 1.
    Labels flagged by ``tie`` (the two half labels a ≻ b, b ≻ a of one tie) are read as the consensus
    says them, log σ(d): a tie is half a win each way for the scores and no answer right or wrong, so
    it says nothing of η (under the mixture a tie pair's likelihood, pq + η(1 − η)(p − q)² with
    p = σ(d), q = 1 − p, would pull every tying worker's η towards ½)."""
    return _label_log_lik_of_d(s[..., a] - s[..., b], logit_eta, k, y, tie)


def crowdbt_log_lik(s: torch.Tensor, logit_eta: torch.Tensor, a, b, k, y, tie=None, w=None) -> torch.Tensor:
    """Σ_p w_p log P(y_p | s, η) of the crowdBT likelihood, vectorised over labels (``w``: each label's
    weight, as that many copies of it; None: 1)."""
    ll = crowdbt_label_log_lik(s, logit_eta, a, b, k, y, tie)
    return ll.sum(-1) if w is None else (ll * w).sum(-1)


def tie_labels(data) -> torch.Tensor | None:
    """Which labels are halves of a tie (``ties="half"`` writes a tie as a ≻ b and b ≻ a, marked in
    ``data.tie_halves``), or None where there are none."""
    halves = getattr(data, "tie_halves", None)
    return None if halves is None else torch.from_numpy(np.asarray(halves, dtype=bool))


def score_evidence(s, logit_eta, a, b, k, y, tie, score_sd: float, weights=None):
    """Each score's own evidence, as a Gaussian pseudo-observation t̃_i ~ N(s_i, 1/λ_i) (the Laplace
    approximation of the labels' likelihood about s_i, the other scores held at the MAP ŝ):
    λ_i = Σ_{p ∋ i} w_p with w_p = −∂² log P(y_p | d_p)/∂d_p² at ŝ (times the label's weight, where
    ``weights`` gives one), d_p = s_a − s_b, and
    t̃_i = ŝ_i (λ_i + 1/σ_s²)/λ_i, the MAP with the N(0, σ_s²) prior of stage 1 divided out (stage 2's GP
    replaces it). The mixture's w_p can be negative where a worker's η is near ½: those count 0.
    Returns (t̃, 1/λ) (N,) each."""
    d = (s[a] - s[b]).detach().requires_grad_(True)
    ll = _label_log_lik_of_d(d, logit_eta, k, y, tie)
    (g1,) = torch.autograd.grad(ll.sum(), d, create_graph=True)
    (g2,) = torch.autograd.grad(g1.sum(), d)
    w = (-g2).clamp_min(0.0).detach()
    if weights is not None:
        w = w * weights
    lam = torch.zeros(s.shape[0], dtype=s.dtype).index_add(0, a, w).index_add(0, b, w).clamp_min(1e-6)
    return s * (1.0 + 1.0 / (score_sd ** 2 * lam)), 1.0 / lam


def _label_log_lik_of_d(d, logit_eta, k, y, tie):
    """:func:`crowdbt_label_log_lik` as a function of each label's d_p = s_a − s_b."""
    said = d * (2.0 * y - 1.0)  # the said winner's score minus the loser's
    ls = torch.nn.functional.logsigmoid
    out = torch.logaddexp(ls(logit_eta[k]) + ls(said), ls(-logit_eta[k]) + ls(-said))
    return out if tie is None else torch.where(tie, ls(said), out)


def crowdbt_log_prior(s, logit_eta, model: CrowdBTGP) -> torch.Tensor:
    """log N(s; 0, σ_s²) + log p(logit η) up to constants, where p(logit η) = p(η) |dη/dlogit η| and
    p(η) = π Beta(η; α_η, β_η) + (1 − π) Beta(η; 1, 1): with x = logit η, Beta(α, β) gives logit η the
    density σ(x)^α σ(−x)^β / B(α, β). With π = 1 the normalising constant is dropped."""
    return (-0.5 * (s / model.score_sd) ** 2).sum() + reliability_log_prior(logit_eta, model).sum()


def reliability_log_prior(logit_eta, model: CrowdBTGP) -> torch.Tensor:
    """log p(logit η_k) of each worker (:func:`crowdbt_log_prior`), up to a constant where π = 1."""
    a, b = model.reliability_prior
    ls = torch.nn.functional.logsigmoid
    reliable = a * ls(logit_eta) + b * ls(-logit_eta)
    pi = float(model.reliable_share)
    if pi == 1.0:
        return reliable
    log_beta = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    anyone = ls(logit_eta) + ls(-logit_eta)  # Beta(1, 1): B(1, 1) = 1
    return torch.logaddexp(math.log(pi) + reliable - log_beta, math.log1p(-pi) + anyone)


def prior_mean_reliability(model: CrowdBTGP) -> float:
    """E[η] under the prior: π α_η / (α_η + β_η) + (1 − π) / 2."""
    a, b = model.reliability_prior
    pi = float(model.reliable_share)
    return pi * a / (a + b) + (1.0 - pi) / 2.0


SIGNAL = (0.25, 0.5, 1.0, 2.0)  # σ_f² as multiples of the scores' variance
NOISE = (0.01, 0.03, 0.1, 0.3, 1.0)  # σ_n² as multiples of the scores' variance


@dataclass(kw_only=True)
class CrowdBTGPPosterior(Posterior):
    """Scores and reliabilities of crowdBT (MAP) and the GP over features fitted to the scores
    (``setup`` is the stage-2 sparse GP).

    The consensus score of an item is h = g(x) + r: the GP's g and, for a labelled item, its residual
    r ~ N(0, σ_r²) (``noise_var``), seen through its stage-1 score t_i = ŝ_i − mean ŝ with the
    score's own variance v_i (``score_var``). Given u, r_i | t_i ~ N(ρ_i (t_i − g_i), ρ_i v_i) with
    ρ_i = σ_r² / (σ_r² + v_i), so h_i = (1 − ρ_i) g_i + ρ_i t_i + N(0, ρ_i v_i): an item with many
    labels (v_i small) is predicted from its own score, one with few from the GP. ``rho`` is 0 for
    new items and items without labels (h = g), and everywhere with ``item_posterior=False`` (the
    paper's baseline predicts g alone)."""

    scores: pd.Series  # MAP ŝ by item id (NaN for items without labels)
    reliability: pd.Series | None  # MAP η by user id
    mu_u: torch.Tensor  # whitened inducing posterior mean (M,)
    S_u: torch.Tensor  # and covariance (M, M)
    signal_var: float
    noise_var: float
    rho: torch.Tensor | None = None  # ρ_i (N,) over all items
    t: torch.Tensor | None = None  # t_i = ŝ_i − mean ŝ (N,), 0 without labels
    score_var: torch.Tensor | None = None  # v_i (N,)

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

    def item_terms(self, item_features=None):
        """h = Wᵀ u + m + N(0, diag e) for the items (training items without ``item_features``):
        W = σ_f B (1 − ρ) (M, N), m = ρ t (N,), e = σ_f² (1 − ρ)² c + ρ v (N,)."""
        X, _ = self._X(item_features)
        B, c = self.project(X)
        if item_features is not None or self.rho is None:
            zero = torch.zeros(B.shape[1], dtype=DTYPE)
            return self.signal_var ** 0.5 * B, zero, self.signal_var * c
        keep = 1.0 - self.rho
        return (self.signal_var ** 0.5 * B * keep, self.rho * self.t,
                self.signal_var * keep ** 2 * c + self.rho * self.score_var)

    def utilities(self, item_features=None):
        """Predictive mean and variance of the consensus score h of each item (Series)."""
        _, ids = self._X(item_features)
        W, m, e = self.item_terms(item_features)
        mean = W.T @ self.mu_u + m
        var = ((W.T @ self.S_u) * W.T).sum(-1) + e
        index = pd.Index(ids, name="item")
        return (pd.Series(mean.numpy(), index=index, name="mean"),
                pd.Series(var.numpy(), index=index, name="variance"))

    query_users = "workers"  # a query asks a worker, who answers the one consensus by her reliability

    def utility_gaussian(self, user=None, n_draws: int = 1000, seed: int = 0):
        """Mean Wᵀμ_u + m (N,) and covariance Wᵀ S_u W + diag e (N, N) of the training items' scores
        (:meth:`item_terms`)."""
        W, m, e = self.item_terms()
        return W.T @ self.mu_u + m, W.T @ self.S_u @ W + torch.diag(e)

    def label_link(self, users=None):
        """P(y = 1 | g) = η σ(g) + (1 − η) σ(−g) for the asked worker's reliability η (1 without workers)."""
        if users is None or self.reliability is None:
            return lambda g, rows: torch.sigmoid(g)
        eta = torch.as_tensor(self.reliability.to_numpy()[users], dtype=DTYPE)[:, None]
        return lambda g, rows: eta[rows] * torch.sigmoid(g) + (1 - eta[rows]) * torch.sigmoid(-g)

    def predict_proba(self, a, b, item_features=None, users=None, new_users: str = "error") -> np.ndarray:
        """P(a ≻ b). Without ``users``, the consensus P(g_a > g_b) = E[σ(g_a − g_b)] under the GP's mean
        μ and variance v of g_a − g_b, by quadrature (:func:`expected_sigmoid`). With ``users``, what
        crowdBT says each worker k answers (Chen et al. 2013, Eq. 1): η_k p + (1 − η_k)(1 − p) with the
        worker's MAP reliability η_k — a worker who often disagrees with the consensus gets tempered
        (or flipped) predictions, not the consensus's confidence. A user not seen in training is refused
        (``new_users="error"``: a mistyped id should not pass unnoticed); ``"consensus"`` predicts the
        consensus, ``"prior"`` a new worker's prior predictive, η̄ p + (1 − η̄)(1 − p) with η̄ the prior
        mean of the reliability (:func:`prior_mean_reliability`)."""
        p = self._consensus(a, b, item_features)
        if users is None or self.reliability is None:
            return p
        _, pos = seen_users(users, self.data.user_ids, p.shape[0], new_users)
        eta_new = prior_mean_reliability(self.model) if new_users == "prior" else 1.0
        pos = pos.numpy()
        eta = np.where(pos >= 0, self.reliability.to_numpy()[np.maximum(pos, 0)], eta_new)
        return eta * p + (1.0 - eta) * (1.0 - p)

    def _consensus(self, a, b, item_features=None) -> np.ndarray:
        X, ids = self._X(item_features)
        ids_a = a
        a = torch.as_tensor(positions("a", a, ids, hint=False))
        b = torch.as_tensor(positions("b", b, ids, hint=False))
        distinct_pairs(a, b, ids_a)
        if self.rho is None or item_features is not None:  # h = g: Eq. 19's conditional variance of g_a − g_b
            d, c = self.setup.pair_terms(a, b, X)
            mean = self.signal_var ** 0.5 * (d @ self.mu_u)
            var = self.signal_var * (((d @ self.S_u) * d).sum(-1) + c)
            return expected_sigmoid(mean, var).numpy()
        W, m, e = self.item_terms()  # h = Wᵀu + m + N(0, diag e)
        d = (W[:, a] - W[:, b]).T
        mean = d @ self.mu_u + m[a] - m[b]
        var = ((d @ self.S_u) * d).sum(-1) + e[a] + e[b]
        return expected_sigmoid(mean, var).numpy()


#: Gauss–Hermite nodes of :func:`expected_sigmoid`
SIGMOID_NODES = 32


def expected_sigmoid(mean: torch.Tensor, var: torch.Tensor, n: int = SIGMOID_NODES) -> torch.Tensor:
    """E[σ(d)] for d ~ N(mean, var), σ logistic, by Gauss–Hermite quadrature with ``n`` nodes.

    Not the probit approximation σ(x) ≈ Φ(x √(π/8)), E[σ(d)] ≈ Φ(μ / √(8/π + v)) (MacKay 1992): it
    matches the logistic's slope at 0 but its tails are a Gaussian's, far thinner than the logistic's
    e^−x, so a confident prediction comes out too confident and a wrong one costs the more. Where the
    items have many labels each the scores are confident enough for that to show: on the calibration
    battery's many-per-item crowd (6 seeds) it put crowdBT–GP's held-out log loss .0012 behind per-item
    Bradley–Terry with the reliabilities at 1, and the quadrature .0001 ahead
    (docs/benchmarks.md, "Many labels per item")."""
    x, w = gauss_hermite(n)
    return torch.sigmoid(mean[..., None] + var.clamp_min(0.0).sqrt()[..., None] * x) @ w


def fit_map(model: CrowdBTGP, data, seed: int = 0, max_iter: int = 200,
            progress_bar=None) -> CrowdBTGPPosterior:
    """Fit crowdBT–GP to ``data`` (users are the workers; without users one reliable worker)."""
    if not isinstance(model, CrowdBTGP):
        raise DataError(f"model: expected CrowdBTGP, got {type(model).__name__}")
    a, b, y = label_tensors(data)
    k = torch.from_numpy(data.users).long() if data.users is not None else torch.zeros_like(a)
    K = int(k.max()) + 1
    N = data.n_items
    tie = None if model.tie_reliability else tie_labels(data)
    wt = weight_tensor(data)
    # stage 1: crowdBT MAP, all labels at once
    s = torch.zeros(N, dtype=DTYPE, requires_grad=True)
    al, be = model.reliability_prior
    # every worker starts reliable, at the mode α_η / (α_η + β_η) of the reliable component
    logit_eta = torch.full((K,), math.log(al / be), dtype=DTYPE, requires_grad=True)
    opt = torch.optim.LBFGS([s, logit_eta], max_iter=max_iter, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-7, tolerance_change=1e-10)

    losses = []

    def closure():
        opt.zero_grad()
        loss = -(crowdbt_log_lik(s, logit_eta, a, b, k, y, tie, wt) + crowdbt_log_prior(s, logit_eta, model))
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
    # stage 2: regression of ŝ on the features of the labelled items
    gp = GPPL(n_inducing=model.n_inducing, kernel=model.kernel, lengthscale=model.lengthscale,
              scaled_lengthscale=bool(model.scaled_lengthscale))
    X_seen = item_inputs(data)[seen]
    if data.item_features.shape[1] == 0:  # no features: independent items (identity kernel on the row)
        setup = GPPLSetup.build(Kernel("identity", torch.ones(1, dtype=DTYPE)), X_seen, X_seen, gp.jitter,
                                exact=True)
    else:
        setup = gp.setup_features(X_seen, seed=seed)
    if model.item_posterior:  # each score's own evidence, t̃ ~ N(s, v), beside the GP
        t, v = (x[seen] for x in score_evidence(s_hat, logit_eta.detach(), a, b, k, y, tie, model.score_sd,
                                                wt))
    else:  # the MAP scores as the regression's targets, one noise for all
        t, v = s_hat[seen], torch.zeros(int(seen.sum()), dtype=DTYPE)
    t = t - t.mean()
    signal_var, noise_var = _grid(setup.B, t, v)
    settings = {}
    if model.learn_kernel:
        learn_ell = learns_by_default(gp, data.item_features)
        setup, signal_var, noise_var, settings = _learn(gp, setup, t, v, signal_var, noise_var, learn_ell,
                                                        model.lengthscale_prior_sd)
    _, (mu_u, S_u) = _dtc(setup.B, t, v + noise_var, signal_var)
    score_index = pd.Index(data.item_ids, name="item")
    scores = pd.Series(np.where(seen.numpy(), s_hat.numpy(), np.nan), index=score_index, name="score")
    rel = None if data.users is None else pd.Series(eta.numpy(), index=pd.Index(data.user_ids, name="user"),
                                                    name="reliability")
    rho = t_all = v_all = None
    if model.item_posterior:
        rho, t_all, v_all = (torch.zeros(N, dtype=DTYPE) for _ in range(3))
        rho[seen] = noise_var / (noise_var + v)
        t_all[seen] = t
        v_all[seen] = v
    return CrowdBTGPPosterior(model=model, setup=setup, data=data, method="map", scores=scores,
                              reliability=rel, mu_u=mu_u, S_u=S_u, signal_var=signal_var,
                              noise_var=noise_var, rho=rho, t=t_all, score_var=v_all,
                              trace={"loss": np.asarray(losses)},
                              settings=dict(seed=seed, max_iter=max_iter, converged=bool(converged),
                                            signal_var=signal_var, noise_var=noise_var, **settings))


def _grid(B, t, v):
    """(σ_f², σ_r²) of the grid (:data:`SIGNAL` × :data:`NOISE`, multiples of the scores' variance)
    with the highest DTC marginal likelihood (:func:`_dtc`)."""
    v0 = float(t.var()) if t.numel() > 1 else 1.0
    best = max(((_dtc(B, t, v + sn * v0, sf * v0)[0], sf * v0, sn * v0) for sf in SIGNAL for sn in NOISE),
               key=lambda r: r[0])
    return best[1], best[2]


def _learn(gp, setup, t, v, signal_var, noise_var, learn_ell: bool, prior_sd: float, max_iter: int = 50):
    """Type-II MAP of θ = (log ℓ_1..D, log σ_f², log σ_r²): L-BFGS on −log N(t; 0, σ_f² BᵀB + diag(σ_r²
    + v)) − Σ_d log N(log ℓ_d; log ℓ_d⁰, prior_sd²), with B = L_mm⁻¹ K_mn at ℓ (the inducing inputs
    fixed; exact when every item is inducing) and ℓ⁰ the starting length-scales (the median heuristic,
    Eq. 26). The weak prior keeps ℓ finite where the likelihood is flat, while a feature the scores do
    not vary with can grow its ℓ until it stops mattering. Started at the grid's σ_f², σ_r²; ℓ stays
    fixed without ``learn_ell`` (a kernel or length-scale the user set, no features). Returns the
    setup at the learned ℓ, σ_f², σ_r² and the settings that report them."""
    ard = ARDGP.of(gp, setup, "learn_kernel") if learn_ell else None
    ell0 = setup.kernel.lengthscale.detach().clone() if learn_ell else None
    theta = torch.cat([torch.log(ell0) if learn_ell else torch.zeros(0, dtype=DTYPE),
                       torch.tensor([math.log(signal_var), math.log(noise_var)], dtype=DTYPE)])
    theta = theta.clone().requires_grad_(True)
    D = 0 if ell0 is None else ell0.shape[0]

    def objective(th):
        B = ard.sparse_gp(th[:D].exp()).B if learn_ell else setup.B
        lml, _ = _dtc(B, t, v + th[D + 1].exp(), th[D].exp(), moments=False)
        if learn_ell:
            lml = lml - 0.5 * (((th[:D] - torch.log(ell0)) / prior_sd) ** 2).sum()
        return -lml

    opt = torch.optim.LBFGS([theta], max_iter=max_iter, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-6, tolerance_change=1e-9)
    start = float(objective(theta.detach()))

    def closure():
        opt.zero_grad()
        loss = objective(theta)
        loss.backward()
        return loss

    try:
        opt.step(closure)
        th = theta.detach()
        ok = bool(torch.isfinite(th).all()) and float(objective(th)) <= start
    except (RuntimeError, NumericalError):  # a failed factorisation along the line search
        ok = False
    if not ok:  # keep the start (the grid's variances, the starting ℓ)
        return setup, signal_var, noise_var, {"kernel_learned": False}
    signal_var, noise_var = float(th[D].exp()), float(th[D + 1].exp())
    out = {"kernel_learned": True}
    if learn_ell:
        ell = th[:D].exp()
        setup = dataclasses.replace(gp, lengthscale=ell).setup_features(setup.X, seed=0, inducing=setup.Z)
        out.update(learned_lengthscale=ell.tolist(), start_lengthscale=ell0.tolist())
    return setup, signal_var, noise_var, out


def item_inputs(data) -> torch.Tensor:
    """The GP's inputs for the data's items: their features, or their row index when they have none."""
    if data.item_features.shape[1] == 0:
        return torch.arange(data.n_items, dtype=DTYPE)[:, None]
    return torch.as_tensor(data.item_features, dtype=DTYPE)


def _dtc(B, t, noise, signal_var, moments: bool = True):
    """DTC log marginal likelihood log N(t; 0, σ_f² BᵀB + diag n) (Titsias 2009, Eq. 7 without the
    trace term; exact when every item is inducing) and the whitened posterior N(μ_u, S_u) of u, via
    A = I + σ_f² B diag(n)⁻¹ Bᵀ (Woodbury, O(N M²)): S_u = A⁻¹, μ_u = σ_f A⁻¹ B n⁻¹ t. ``B`` (M, N) =
    L_mm⁻¹ K_mn, ``noise`` n (N,) the per-item noise variances (or a number), ``signal_var`` σ_f².
    Differentiable in B, n and σ_f² (what the learned kernel needs); ``moments=False`` skips (μ_u, S_u)."""
    n = torch.as_tensor(noise, dtype=DTYPE).expand(t.shape)
    sf = torch.as_tensor(signal_var, dtype=DTYPE).sqrt()
    Bn = B / n
    A = torch.eye(B.shape[0], dtype=DTYPE) + sf ** 2 * Bn @ B.T
    L_A = cholesky(A, what="I + σ_f² B diag(n)⁻¹ Bᵀ (crowdBT–GP regression)")
    Bt = Bn @ t
    w = solve_lower(L_A, Bt[:, None])[:, 0]
    quad = t @ (t / n) - sf ** 2 * (w @ w)
    logdet = torch.log(n).sum() + logdet_from_chol(L_A)
    lml = -0.5 * (quad + logdet + t.numel() * math.log(2 * math.pi))
    if not moments:
        return lml, None
    S_u = torch.cholesky_inverse(L_A)
    return float(lml), (sf * (S_u @ Bt), S_u)


def to_arviz(post, n_draws: int = 500, seed: int = 0):
    """crowdBT–GP: posterior g (item), draws of the consensus score from the stage-2 GP
    regression, and eta (user), the stage-1 MAP reliabilities repeated in every draw (a point
    estimate: its sd is 0, and its variable attrs say so). Log-likelihood and replicated labels per
    label use the crowdBT likelihood η σ(g_a − g_b) + (1 − η) σ(g_b − g_a) with these g and η.
    The two-stage fit is not a joint posterior, so the checks read it as an approximation."""
    from ...diagnostics.arviz import chain_shape, finish  # ArviZ only when asked

    d = post.data
    gen = torch.Generator().manual_seed(seed)
    W, m, e = post.item_terms()  # h = Wᵀu + m + N(0, diag e): (M, N), (N,), (N,)
    L_u = cholesky(post.S_u, what="S_u (crowdBT–GP inducing posterior)")
    u = post.mu_u + torch.randn(n_draws, post.mu_u.shape[0], dtype=W.dtype, generator=gen) @ L_u.T
    eps = torch.randn(n_draws, W.shape[1], dtype=W.dtype, generator=gen)
    gdraw = u @ W + m + torch.sqrt(e) * eps  # (n, N)
    a, b = torch.as_tensor(d.a), torch.as_tensor(d.b)
    users = d.users is not None
    k = torch.as_tensor(d.users) if users else torch.zeros_like(a)
    eta = torch.tensor(post.reliability.to_numpy() if users else np.ones(1), dtype=W.dtype)
    loglik = crowdbt_label_log_lik(gdraw, torch.logit(eta), a, b, k, torch.as_tensor(d.y, dtype=W.dtype))
    p1 = crowdbt_label_log_lik(gdraw, torch.logit(eta), a, b, k, torch.ones(a.shape, dtype=W.dtype)).exp()
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
