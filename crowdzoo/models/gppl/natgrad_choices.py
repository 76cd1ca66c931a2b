"""GPPL's natural-gradient SVI on choices among k items (a :class:`~crowdzoo.data.ChoiceData`).

The same q(f_m) = N(m, S), q(s) = Gamma(α, β) and steps as the pairwise route (Simpson & Gurevych
2020, Alg. 1, Eq. 15–18; :mod:`.natgrad`), with the exact likelihood replaced by the probit choice of
:mod:`crowdzoo.gp.choice` (Thurstone's multinomial probit, best and, for best–worst rows, worst): the
likelihood the svi and nuts routes fit (:func:`~crowdzoo.models.gppl.model.gppl_choice_model`).

A row r offers the items J_r (k of them); under q their utilities f_J = A_J f_m (+ r_J with the item
residual) are jointly Gaussian, N(μ_r, Σ_r) with μ_r = A_J m, Σ_r = A_J S A_Jᵀ, and each member's
conditional variance c_j / E[s] widens its noise as in the svi model. The row's expected
log-likelihood E[log p(row | f_J)] and its derivatives g_r = ∂/∂μ_r, G_r = ∂/∂Σ_r
(:func:`~crowdzoo.gp.choice.expected_row_log_lik`: rows of two items by the pairwise route's 1-D
Gauss–Hermite rule, larger rows by fixed antithetic quasi-Monte Carlo points through the mode-centred
probit, their G at the nearest negative semi-definite matrix, :func:`~crowdzoo.gp.choice.negative_part`)
give the natural gradient of Eq. 17 as for a label
(:func:`~crowdzoo.gp.choice.block_natural_params`):

    Λ_lik = −2 π Σ_r A_Jᵀ G_r A_J,        η_lik = π Σ_r A_Jᵀ (g_r − 2 G_r A_J m)

(the pairwise route's −2 g_v d dᵀ and d (g_μ − 2 g_v d·m) with d = A_a − A_b, which a two-item row
reproduces to rounding; the residual's mean is no part of A_J m, as it is no part of d·m). q(s)
follows Eq. 15, with the likelihood's pull through c_j / E[s] where the GP is sparse
(:func:`~crowdzoo.gp.conjugate.scale_rate`), and the item residual's q(r) a damped natural-gradient
step from the rows' diagonal derivatives (:mod:`crowdzoo.gp.residual`). The bound is Eq. 30 with these
rows' expected log-likelihoods. The kernel stays at the model's (the median heuristic or
``lengthscale=``), as in the svi and nuts routes on choices.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ...data.tensors import choice_tensors
from ...errors import DataError
from ...gp import natural, residual
from ...gp.choice import block_natural_params, expected_row_log_lik, negative_part, normal_points
from ...gp.conjugate import gamma_moments, kl_gamma, q_s, require_gamma, scale_rate
from ...gp.linalg import DTYPE, cho_solve, logdet_from_chol
from ...inference import natgrad as loop
from ...inference.distributed import Shard
from ...inference.hyper import default_batch_size
from .posterior import GPPLPosterior

WHAT = "S⁻¹ (natural-gradient precision)"


class Basis(NamedTuple):
    """q(f_m)'s coordinates: f_m itself, with the prior precision's K_mm⁻¹ and log |K_mm| (the pairwise
    route's unwhitened basis; the kernel is fixed here)."""

    setup: object
    K_inv: torch.Tensor
    logdet_K: torch.Tensor


def basis_of(setup) -> Basis:
    return Basis(setup, cho_solve(setup.L_mm, torch.eye(setup.M, dtype=DTYPE)), logdet_from_chol(setup.L_mm))


class ChoiceProblem(NamedTuple):
    """What a fit to choices holds fixed: the rows (items (R, k_max), mask, best, worst or None), the
    items' conditional-mean rows A (N, M) and variances c (N,) given f_m (times s), the Gamma prior of
    s, the basis (K_mm⁻¹), the quadrature's settings and the residual's prior (or None)."""

    items: torch.Tensor
    mask: torch.Tensor
    best: torch.Tensor
    worst: torch.Tensor | None
    A: torch.Tensor
    c: torch.Tensor
    exact: bool
    alpha0: float
    beta0: float
    basis: Basis
    shard: Shard
    n_gh: int = 20
    points: torch.Tensor | None = None
    residual: tuple | None = None


class ChoiceState(NamedTuple):
    """q(f_m), q(s) (shape, rate) and the residual's q (or None)."""

    q: natural.Gaussian
    shape: torch.Tensor
    rate: torch.Tensor
    r: residual.Residual | None = None


def _rows(p: ChoiceProblem, idx):
    items = p.items[idx]
    mask = p.mask[idx]
    return items, mask, p.best[idx], None if p.worst is None else p.worst[idx]


def row_moments(p: ChoiceProblem, q, Es, r, items, mask):
    """The rows' members under q: A_J (R, K, M) (zero at padding), μ_r (R, K), Σ_r (R, K, K) and the
    noise's extra variance c_j / E[s] (R, K) (None for an exact GP), the residual's moments added."""
    A_J = p.A[items] * mask[..., None]
    mu = A_J @ q.m
    cov = A_J @ q.S @ A_J.transpose(-1, -2)
    if r is not None:
        mu = mu + r.q.m[items] * mask
        cov = cov + torch.diag_embed(r.q.S[items] * mask)
    var = None if p.exact else p.c[items] / Es * mask
    return A_J, mu, cov, var


def _expected(p: ChoiceProblem, q, Es, r, idx):
    items, mask, best, worst = _rows(p, idx)
    A_J, mu, cov, var = row_moments(p, q, Es, r, items, mask)
    ell, g_mu, g_cov, g_var = expected_row_log_lik(mu, cov, mask, best, worst, var, p.n_gh, p.points)
    rule = mask.sum(-1) > 2  # rows of the point rule: its curvature at the nearest admissible one
    if bool(rule.any()):
        g_cov = torch.where(rule[:, None, None], negative_part(g_cov), g_cov)
    return items, mask, A_J, mu, ell, g_mu, g_cov, g_var


def init(problem: ChoiceProblem, gen: torch.Generator) -> ChoiceState:
    """q at the prior, E[s] = α₀/β₀ (the residual's q at its prior)."""
    Es0 = problem.alpha0 / problem.beta0
    q = natural.gaussian(Es0 * problem.basis.K_inv, torch.zeros(problem.basis.setup.M, dtype=DTYPE), WHAT)
    r = None if problem.residual is None else residual.init(problem.A.shape[0], *problem.residual)
    return ChoiceState(q, torch.tensor(problem.alpha0, dtype=DTYPE), torch.tensor(problem.beta0, dtype=DTYPE),
                       r)


def step(state: ChoiceState, batch: loop.Batch, p: ChoiceProblem):
    """One iteration on the rows ``batch.idx``: q(f_m) by Eq. 17–18 with the rows' natural gradient
    (module docstring), the residual's q(r), then q(s) by Eq. 15."""
    idx, r_i, pi = batch.idx, batch.rho, batch.pi
    Es = state.shape / state.rate
    _, _, A_J, _, _, g_mu, g_cov, _ = _expected(p, state.q, Es, state.r, idx)
    Lam_lik, eta_lik = block_natural_params(A_J, g_mu, g_cov, A_J @ state.q.m)
    Lam_lik, eta_lik = pi * Lam_lik, pi * eta_lik
    q = natural.step(state.q, Es * p.basis.K_inv, Lam_lik, eta_lik, r_i, WHAT)
    r = state.r
    if r is not None:
        r = _residual_step(r, p, q, Es, idx, r_i, pi)
    shape, rate = q_s(p.alpha0, p.beta0, p.basis.setup.M, natural.second(q, p.basis.K_inv))  # Eq. 15
    if not p.exact:  # the likelihood's pull through c_j / E[s]
        items, mask, _, _, _, _, _, g_var = _expected(p, q, Es, r, idx)
        rate = scale_rate(rate, shape, -pi * (g_var * p.c[items] * mask).sum())
    state = ChoiceState(q, shape, rate, r)
    return state, None


def _residual_step(r: residual.Residual, p: ChoiceProblem, q, Es, idx, r_i, pi) -> residual.Residual:
    """The residual's q(r) from the rows' derivatives at the new q(f_m)
    (:func:`~crowdzoo.gp.residual.choice_step`)."""
    items, mask, _, _, _, g_mu, g_cov, _ = _expected(p, q, Es, r, idx)
    return residual.choice_step(r, items, mask, g_mu, g_cov, r_i, pi, *p.residual)


def bound(state: ChoiceState, idx, scale: float, p: ChoiceProblem) -> float:
    """Eq. 30 on the rows ``idx``, their expected log-likelihood times ``scale``."""
    Es, Elog_s = gamma_moments(state.shape, state.rate)
    ell = _expected(p, state.q, Es, state.r, idx)[4]
    kl_f = natural.kl(state.q, p.basis.K_inv, p.basis.logdet_K, Es, Elog_s, WHAT)
    kl_r = 0.0 if state.r is None else residual.kl(state.r, *p.residual)
    return float(scale * ell.sum() - kl_f - kl_r - kl_gamma(state.shape, state.rate, p.alpha0, p.beta0))


def fit_choices(model, data, seed: int = 0, likelihood: str | None = None, batch_size: int | None = None,
                delay: float = 1.0, forgetting_rate: float = 0.9, max_iter: int = 500, min_iter: int = 10,
                tol: float | None = None, eval_every: int = 5, eval_size: int = 2000, n_gh: int = 20,
                n_points: int = 64, learn_kernel: bool | None = None, learn_inducing: bool = False,
                progress_bar: bool | None = None, setup=None, callback=None, resume=None, checkpoint=None,
                checkpoint_every: int = 0, **unused) -> GPPLPosterior:
    """Fit GPPL to choices by natural-gradient SVI (module docstring); the settings are the pairwise
    route's (:func:`~crowdzoo.models.gppl.natgrad.fit_natgrad`), with ``n_points`` the antithetic pairs of
    the rule over rows of more than two items (64: on 10 items and 60 best–worst rows of 4, the utilities'
    posterior means within .006 and variances within .013 of 256 pairs', in a seventh of the time). The
    length-scales stay fixed (``learn_kernel``,
    ``learn_inducing`` and a ``lengthscale_prior`` are refused), the likelihood is the exact one; ``resume``
    and ``checkpoint`` as there, in one process."""
    if learn_kernel or learn_inducing or getattr(model, "lengthscale_prior", None) is not None:
        raise DataError("learn_kernel: choices are fitted with fixed length-scales (the median heuristic or "
                        "lengthscale=); drop {learn_kernel}, {learn_inducing} and lengthscale_prior",
                        arg="learn_kernel", settings=("learn_kernel", "learn_inducing"))
    if likelihood not in (None, "exact"):
        raise DataError("likelihood: choices take the exact likelihood (the probit choice), got "
                        f"{likelihood!r}", arg="likelihood", settings=("likelihood",))
    odd = sorted(k for k in unused if k not in ("inner_iter", "kernel_lr", "rho_min", "distributed"))
    if odd or unused.get("distributed"):
        bad = odd[0] if odd else "distributed"
        raise DataError(f"{bad}: natgrad on choices takes no {bad!r} (it runs in one process)", arg=bad)
    alpha0, beta0 = require_gamma(model.prior_s(), "s_prior")
    resume, setup = loop.resume_setup(resume, setup, lambda: model.setup(data, seed=seed))
    items, mask, best, worst = choice_tensors(data)
    A, c = setup.item_terms()
    R = items.shape[0]
    K = mask.shape[1]
    points = normal_points(K, n_points, seed) if K > 2 else None
    problem = ChoiceProblem(items, mask, best, worst, A, c, bool(setup.exact), alpha0, beta0, basis_of(setup),
                            Shard(0, 1, 0, R, R, 0), n_gh, points,
                            None if setup.residual_prior is None
                            else require_gamma(setup.residual_prior, "shape_r0, rate_r0"))
    settings = loop.Settings(batch_size=default_batch_size(batch_size, False, R), delay=delay,
                             forgetting_rate=forgetting_rate, max_iter=max_iter, min_iter=min_iter,
                             tol=1e-4 if tol is None else tol, eval_every=eval_every, eval_size=eval_size,
                             progress_bar=progress_bar, checkpoint=checkpoint,
                             checkpoint_every=checkpoint_every, callback=callback)
    res = loop.run(loop.algorithm(init, step, bound, problem, R), settings, seed=seed,
                   what="natgrad GPPL (choices)",
                   advice="a larger {delay} ε or {forgetting_rate} r (smaller steps), a larger {batch_size}, "
                          "or fewer inducing points ({n_inducing})",
                   advice_settings=("delay", "forgetting_rate", "batch_size", "n_inducing"),
                   resume=resume, meta=dict(model=model, method="natgrad"), setup=setup)
    state = res.state
    return GPPLPosterior(
        model=model, setup=setup, data=data, method="natgrad", weights=torch.ones(1, dtype=DTYPE),
        means=state.q.m[None], covs=state.q.S[None], s=(state.shape / state.rate).reshape(1),
        s_shape=float(state.shape), s_rate=float(state.rate),
        **({} if state.r is None else dict(r_means=state.r.q.m[None], r_vars=state.r.q.S[None],
                                           s_r=state.r.Es.reshape(1))),
        trace={"bound": np.asarray(res.stop.bounds), "bound_iteration": np.asarray(res.stop.iterations)},
        settings=dict(likelihood="exact", learn_kernel=False, n_points=n_points, **res.settings),
        checkpoint=res.checkpoint)
