"""Expectation propagation for GPPL with exact probit pairwise sites (the site algebra is
:func:`crowdzoo.inference.ep.ep_fixed_s`).

Each label p is a probit factor of one direction of the inducing utilities,
Φ(y'_p h_pᵀ f_m) with y' = 2y − 1 and h_p = (A_a − A_b) / √(1 + c_p / s) (A = K_nm K_mm⁻¹,
c_p the conditional variance of f_a − f_b given f_m; for the exact model h_p = e_a − e_b and
c_p = 0). EP replaces each factor by a rank-one Gaussian site exp(−½ τ_p z² + ν_p z) in
z = h_pᵀ f_m (Minka 2001; Chu & Ghahramani 2005 use the same pairwise probit; Rasmussen &
Williams 2006, §3.6 for the moments). Sites are updated in parallel with damping, so one sweep
costs O(M³ + P M²) and is vectorised over pairs.

The inverse scale s is **integrated over a grid** by default: the EP evidence Z_EP(s) (R&W
Eq. 3.65 generalised to rank-one sites) times the prior p(s) weights one Gaussian per grid value,
and the posterior is their mixture. ``s_mode="max"`` instead keeps the single grid value that
maximises the EP evidence (type-II maximum likelihood).

``learn_kernel=True`` first maximises log Z_EP(ℓ, s) + log p(s) over the log length-scales ℓ (ARD)
and log s by L-BFGS, from the median heuristic (Eq. 26) and the prior's mean of s, rerunning EP
(warm-started) at every evaluation. At the EP fixed point the gradient with the sites held fixed is
the exact gradient of the evidence (:func:`~crowdzoo.inference.ep.ep_log_evidence`). The grid over s
then runs with the learned length-scales, which the posterior's model carries (the crowdGPPL paper
fixes them and names learning them as future work, §6).

Ties (``ties="model"``): each label's site is the ordered probit's (:mod:`crowdzoo.inference.ep`; a tie
the interval Φ(τ_p − z) − Φ(−τ_p − z) of z = h_pᵀ f_m), with τ_p = τ/√(1 + c_p/s), the threshold of
GPPL's model on the scale of h_p. τ is a point estimate, as natgrad's: log τ joins the L-BFGS above
(with log s, and the length-scales under ``learn_kernel``), which then maximises
log Z_EP + log p(s) + log p(log τ) under ``tie_prior`` (the mode of log τ, started where a tie of equal
items is as common as ties are in the data); the grid over s then runs at that τ.

The order effect (``GPPL(order_effect=True)``, :mod:`crowdzoo.gp.order`): δ is one more latent beside
f_m, x = (f_m, δ) with the prior N(0, blockdiag(K_mm / s, σ_δ²)), and each label's direction gains a 1
for it, h_p = (A_a − A_b, 1) / √(1 + c_p / s): the sites and the evidence are those above on the
longer x (the prior covariance of the pairs' differences gains σ_δ² 11ᵀ). Each component's posterior
mean and variance of δ are read off its last coordinate. EP's prior has mean 0, so ``order_prior``
must too (Normal(0, σ_δ)).

Weights (``PairwiseData.weights``): a label of weight w is w copies of its factor, one site of w copies'
natural parameters updated by power EP (:mod:`crowdzoo.inference.ep`); its terms of the evidence count w
times, and the share of ties that starts τ is the weighted share.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from ...core.seeds import isolated
from ...data.tensors import label_tensors, weight_tensor
from ...errors import DataError
from ...gp import order
from ...gp.learn import at_learning_start, check_learnable, log_prior_of_theta
from ...gp.linalg import DTYPE, cholesky
from ...gp.ordinal import initial_tau
from ...inference.ep import ep_fixed_s, ep_log_evidence
from .posterior import GPPLPosterior


def fit_ep(model, data, seed: int = 0, s_mode: str = "integrate", n_grid: int = 25,
           s_range=None, damping: float = 0.5, max_iter: int = 200, tol: float = 1e-6,
           min_weight: float = 1e-6, learn_kernel: bool = False, kernel_iter: int = 50, setup=None,
           progress_bar=None) -> GPPLPosterior:
    """Fit GPPL by EP, integrating s over ``n_grid`` log-spaced values (``s_mode="integrate"``)
    or keeping the evidence-maximising one (``s_mode="max"``).

    ``s_range=(lo, hi)`` sets the grid; by default it spans the prior's 0.1 % – 99.9 % quantiles
    (estimated from 20 000 prior draws, so any prior works).
    """
    if s_mode not in ("integrate", "max"):
        raise ValueError(f"s_mode: expected 'integrate' or 'max', got {s_mode!r}")
    order_var = _order_variance(model)
    a, b, y = label_tensors(data)
    w = weight_tensor(data)
    sgn = 2.0 * y - 1.0  # 0: a tie
    learned, tie = {}, None
    if learn_kernel or data.has_ties:
        model, learned = learn_kernel_ep(model, data, a, b, sgn, seed, damping, tol, max_iter, kernel_iter,
                                         learn_kernel=learn_kernel, setup=None if learn_kernel else setup)
        tie = learned.get("tau")
        setup = None if learn_kernel else setup
    setup = setup or model.setup(data, seed=seed)
    if setup.residual_prior is not None:  # EP's sites are over f_m alone: no item residual
        setup = dataclasses.replace(setup, residual_prior=None)
    prior = setup.s_prior
    if s_range is None:
        with isolated(seed):  # the caller's RNG is left as it was
            draws = prior.sample((20000,)).to(DTYPE)
        lo, hi = torch.quantile(draws, torch.tensor([0.001, 0.999], dtype=DTYPE)).tolist()
    else:
        lo, hi = s_range
    grid = torch.logspace(math.log10(lo), math.log10(hi), n_grid, dtype=DTYPE)
    means, covs, logw, logZs, iters = [], [], [], [], []
    tau = nu = None
    c = setup.pair_rows(a, b)[1] if tie is not None else None
    for s in grid.flip(0):  # from large s (tight prior) to small: warm starts stay stable
        K, H = prior_and_rows(setup, a, b, s, order_var)
        t_p = None if tie is None else tie_thresholds(tie, c, s)
        mu, Sigma, tau, nu, log_Z, it = ep_fixed_s(K, H, sgn, tau, nu, damping, max_iter, tol,
                                                   threshold=t_p, weights=w)
        means.append(mu)
        covs.append(Sigma)
        logZs.append(log_Z)
        iters.append(it)
        # ∫ p(s) Z(s) ds on a log grid: weight ∝ p(s) Z(s) s
        logw.append(log_Z + float(prior.log_prob(s)) + math.log(float(s)))
    grid = grid.flip(0)
    logw_t = torch.tensor(logw, dtype=DTYPE)
    logZ_t = torch.tensor(logZs, dtype=DTYPE)
    if s_mode == "max":
        keep = torch.tensor([int(torch.argmax(logZ_t))])
        w = torch.ones(1, dtype=DTYPE)
    else:
        w_all = torch.softmax(logw_t, 0)
        keep = torch.nonzero(w_all > min_weight).reshape(-1)
        w = w_all[keep] / w_all[keep].sum()
    means, covs = torch.stack(means)[keep], torch.stack(covs)[keep]
    delta = {}
    if order_var is not None:  # x = (f_m, δ): δ is the last coordinate
        M = setup.M
        delta = dict(order_means=means[:, M].clone(), order_vars=covs[:, M, M].clone())
        means, covs = means[:, :M].clone(), covs[:, :M, :M].clone()
    return GPPLPosterior(
        model=model, setup=setup, data=data, method="ep", weights=w, **delta,
        means=means, covs=covs, s=grid[keep],
        tau=None if tie is None else torch.full((len(keep),), tie, dtype=DTYPE),
        trace={"s_grid": grid.numpy(), "log_evidence": logZ_t.numpy(),
               "log_weight": logw_t.numpy(), "iterations": np.asarray(iters)},
        settings=dict(seed=seed, s_mode=s_mode, n_grid=n_grid, s_range=(lo, hi), damping=damping,
                      max_iter=max_iter, tol=tol, learn_kernel=learn_kernel, **learned))


def _order_variance(model) -> float | None:
    """σ_δ² of the model's order effect (None without one); a prior of nonzero mean is refused."""
    prior = order.prior_of(model)
    if prior is None:
        return None
    mu0, var0 = order.moments_of(prior)
    if mu0 != 0.0:
        raise DataError(f"order_prior: ep's prior has mean 0, but the order effect's has mean {mu0:g}; pass "
                        "Normal(0, σ) or fit with {method='natgrad'}, 'svi' or 'nuts'", arg="order_prior",
                        settings=("method",))
    return var0


def prior_and_rows(setup, a, b, s, order_var=None):
    """EP's prior covariance and the labels' directions at inverse scale s: K_mm / s and
    h_p = (A_a − A_b) / √(1 + c_p / s) (P, M); with the order effect (``order_var`` σ_δ²) those of
    x = (f_m, δ): blockdiag(K_mm / s, σ_δ²) and h_p = (A_a − A_b, 1) / √(1 + c_p / s) (P, M + 1)."""
    rows, c = setup.pair_rows(a, b)
    scale = torch.sqrt(1.0 + c / s)
    H = rows / scale[:, None]
    K = setup.K_mm / s
    if order_var is None:
        return K, H
    K = torch.block_diag(K, torch.full((1, 1), order_var, dtype=DTYPE))
    return K, torch.cat([H, (1.0 / scale)[:, None]], 1)


def tie_thresholds(tau, c, s):
    """Each label's threshold τ_p = τ/√(1 + c_p/s) on the scale of its EP direction h_p (module
    docstring)."""
    return tau / torch.sqrt(1.0 + c / s)


def learn_kernel_ep(model, data, a, b, sgn, seed, damping, tol, max_iter, kernel_iter, learn_kernel=True,
                    setup=None):
    """(the model, with the learned length-scales under ``learn_kernel``, and what was learned): the
    maximum of log Z_EP(ℓ, s, τ) + log p(s) (+ log p(ℓ) under the model's ``lengthscale_prior``: type-II
    MAP; + log p(log τ) under ``tie_prior`` for data with ties) over (log ℓ, log s, log τ) by L-BFGS
    (module docstring); without ``learn_kernel`` ℓ stays the setup's and only (log s, log τ) move."""
    if learn_kernel:
        check_learnable(model, data.item_features)
    start = at_learning_start(model, data.item_features) if learn_kernel else model  # median r = 1
    base = setup or start.setup(data, seed=seed)
    ell0 = base.kernel.lengthscale if learn_kernel else base.kernel.lengthscale[:0]
    prior = model.prior_s()
    ties = data.has_ties
    w = weight_tensor(data)
    start = [torch.log(ell0), torch.log(prior.mean.reshape(1))]
    if ties:
        share = float(np.average(data.y == 0.5, weights=data.label_weights))  # the weighted share of ties
        start.append(torch.log(initial_tau(share)).reshape(1))
    theta = torch.cat(start).detach().to(DTYPE).requires_grad_()
    n_ell = ell0.shape[0]
    sites = {"tau": None, "nu": None}
    inducing = base.Z if not base.exact else None
    log_prior_ell = (log_prior_of_theta(getattr(model, "lengthscale_prior", None), n_ell) if learn_kernel
                     else None)
    tie_prior = model.prior_tau() if ties else None
    order_var = _order_variance(model)

    def neg_log_evidence():
        s = theta[n_ell].exp()
        if learn_kernel:
            setup = dataclasses.replace(model, lengthscale=theta[:n_ell].exp()).setup(data, seed=seed,
                                                                                     inducing=inducing)
        else:
            setup = base
        K, H = prior_and_rows(setup, a, b, s, order_var)
        L = cholesky(K, jitter=setup.jitter, what="K_mm / s (EP prior)")
        threshold = tie_thresholds(theta[-1].exp(), setup.pair_rows(a, b)[1], s) if ties else None
        with torch.no_grad():  # the sites at the EP fixed point; the same L for EP and the gradient
            _, _, tau, nu, _, _ = ep_fixed_s(K.detach(), H.detach(), sgn, sites["tau"], sites["nu"], damping,
                                             max_iter, tol * 1e-2, L=L.detach(),
                                             threshold=None if threshold is None else threshold.detach(),
                                             weights=w)
        sites.update(tau=tau, nu=nu)
        objective = ep_log_evidence(L, H, sgn, tau, nu, threshold=threshold, weights=w) + prior.log_prob(s)
        if ties:  # the density of log τ
            objective = objective + tie_prior.log_prob(theta[-1].exp()) + theta[-1]
        return -(objective if log_prior_ell is None else objective + log_prior_ell(theta))

    opt = torch.optim.LBFGS([theta], max_iter=kernel_iter, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = neg_log_evidence()
        loss.backward()
        return loss

    opt.step(closure)
    theta = theta.detach()
    learned = {"tau": float(theta[-1].exp())} if ties else {}
    if not learn_kernel:
        return model, learned
    ell = theta[:n_ell].exp()
    return (dataclasses.replace(model, lengthscale=ell),
            {"learned_lengthscale": ell.tolist(), "learned_s": float(theta[n_ell].exp()),
             "start_lengthscale": ell0.tolist(), **learned})
