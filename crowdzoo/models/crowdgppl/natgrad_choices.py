"""crowdGPPL's natural-gradient SVI on choices among k items (a :class:`~crowdzoo.data.ChoiceData` with a
user per row).

The pairwise route's q (Simpson & Gurevych 2020, Eq. 20: q(t) Π_c q(v_c) q(w_c) and the Gamma q(s)),
its sweep over the factors (t, the item residual, v_1..v_C, w_1..w_C; Alg. 2, Eq. 32–37) and its q(s)
(Eq. 15), with the probit choice of :mod:`crowdzoo.gp.choice` in place of the pairwise likelihood: the
likelihood of crowdGPPL's svi and nuts routes on choices (:mod:`.choices`) and of GPPL's natgrad
(:mod:`crowdzoo.models.gppl.natgrad_choices`).

Row r by user j offers the items J_r; under q the members' utilities f_i,j = t_i (+ r_i) + Σ_c v_c,i
w_c,j (Eq. 5) are jointly Gaussian with (every factor independent under q)

    μ_r = A_J t̂ + Σ_c ŵ_c,j o_c,     o_c = A_J v̂_c,
    Σ_r = A_J S_t A_Jᵀ + Σ_c [(ŵ²_c,j + ω_c,j) A_J S_v,c A_Jᵀ + ω_c,j o_c o_cᵀ]   (+ diag of q(r)),

ω_c,j the variance of w_c,j under q, A_J the members' rows of K_nm K_mm⁻¹ — Eq. 25 per member, with the
members' covariances: the user's w_c,j is one number for the whole row. The conditional variances of
Eq. 19 given the inducing values (the items' c_i, the user's d_j) widen each member's noise as in the
svi model, σ²_i = c_i / s_t + Σ_c [c_i / s_v,c (E[w²_c,j] + d_j / s_w,c) + E[v²_c,i] d_j / s_w,c], at
E[s] and q's second moments. The row's E_q[log p(best, worst | f)] and its derivatives g = ∂/∂μ_r,
G = ∂/∂Σ_r and ∂/∂σ² (:func:`~crowdzoo.gp.choice.expected_row_log_lik`) give every factor's natural
gradient (:func:`~crowdzoo.gp.choice.block_natural_params`): t with κ = 1; v_c with κ = w_c,j, the row's
user's weight; w_c,j with, per row, λ = −2 (o_cᵀ G o_c + tr(G A_J S_v,c A_Jᵀ) + Σ_i ∂E/∂σ²_i c_i / s_v,c)
and ν = o_cᵀ g − 2 ŵ_c,j o_cᵀ G o_c (Eq. 36–37's weights, a pair's for a row of two).

Rows of two items take the pairwise route's 1-D Gauss–Hermite rule at every factor of the sweep, so that a
two-item ``ChoiceData`` gives the pairwise exact-likelihood fit's q, iteration for iteration. Larger rows
take the antithetic quasi-Monte Carlo rule of GPPL's route (k − 1 probit quadratures per point), which
costs far more than a pair: their derivatives are evaluated once an iteration, at the sweep's start, and
carried through the sweep by the row's local quadratic model (g moves by 2 G δμ as the factors move
μ_r; G and ∂E/∂σ² stay), so that each factor still sees the others' new moments (coordinate ascent on
the model, not C simultaneous steps that would overshoot). The model is exact at the anchor, so the
sweep's fixed points are those of a sweep that evaluates the rule at every factor. The rule's G is
taken at its nearest negative semi-definite matrix
(:func:`~crowdzoo.gp.choice.negative_part`), where the true one lies.
The bound (Eq. 31) takes the exact rule.

The kernels stay at the model's (the median heuristic or ``lengthscale=``), as in the svi and nuts
routes on choices; the likelihood is the exact one (the paper's linearisation is of Φ on pairs).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from ...data.tensors import choice_tensors
from ...errors import DataError
from ...gp import natural, residual
from ...gp.choice import (
    block_natural_params,
    expected_row_log_lik,
    negative_part,
    normal_points,
)
from ...gp.conjugate import require_gamma
from ...gp.linalg import DTYPE
from ...inference import natgrad as loop
from ...inference.distributed import Shard
from ...inference.hyper import default_batch_size, rho_floor
from . import natgrad as ng
from .members import Rows, Sides, item_part, members, moments, rows_of, sides, user_part


class ChoiceProblem(NamedTuple):
    """What a fit to choices holds fixed: the rows (items (R, k_max), mask, best, worst or None, user j
    (R,)), the items' conditional variances c (N,) (× 1/s; zeros with every item inducing), the priors
    and :class:`~crowdzoo.models.crowdgppl.natgrad.Sides` as in the pairwise
    :class:`~crowdzoo.models.crowdgppl.natgrad.Problem` (whose ``init`` and posterior read the same
    fields), and the rule over rows of more than two items (``points``)."""

    items: torch.Tensor
    mask: torch.Tensor
    best: torch.Tensor
    worst: torch.Tensor | None
    j: torch.Tensor
    c: torch.Tensor
    shard: Shard
    pri: dict
    E0: dict
    sides: Sides
    conditional: bool
    n_gh: int = 20
    init_var: float = 1.0
    points: torch.Tensor | None = None
    residual: tuple | None = None
    space: None = None  # the kernels stay fixed
    tie_prior: None = None  # choices have no ties


def _rows(p: ChoiceProblem, idx) -> Rows:
    return rows_of(p.sides, p.c, p.items[idx], p.mask[idx], p.best[idx],
                   None if p.worst is None else p.worst[idx], p.j[idx])


class Anchor(NamedTuple):
    """The exact derivatives of the rows of more than two items at the sweep's start (zeros at rows of
    two): μ₀, g₀, G₀ and ∂E/∂σ² (None without conditional variance)."""

    mu: torch.Tensor
    g: torch.Tensor
    G: torch.Tensor
    g_var: torch.Tensor | None


def _exact(bt: Rows, rows, mu, cov, var, p: ChoiceProblem):
    i = rows.nonzero()[:, 0]
    return i, expected_row_log_lik(mu[i], cov[i], bt.mask[i], bt.best[i],
                                   None if bt.worst is None else bt.worst[i],
                                   None if var is None else var[i], p.n_gh, p.points)


def anchor(bt: Rows, mu, cov, var, p: ChoiceProblem) -> Anchor:
    g, G = torch.zeros_like(mu), torch.zeros_like(cov)
    g_var = None if var is None else torch.zeros_like(var)
    if bool((~bt.two).any()):
        i, (_, gi, Gi, gvi) = _exact(bt, ~bt.two, mu, cov, var, p)
        g[i], G[i] = gi, negative_part(Gi)
        if g_var is not None:
            g_var[i] = gvi
    return Anchor(mu, g, G, g_var)


def derivatives(a: Anchor, bt: Rows, mu, cov, var, p: ChoiceProblem):
    """(g, G, ∂E/∂σ²) of every row at the moments (μ, Σ, σ²): exact at rows of two, the anchor's
    quadratic model g₀ + 2 G₀ (μ − μ₀) at the others (module docstring)."""
    g = a.g + 2.0 * (a.G @ (mu - a.mu)[..., None])[..., 0]
    G = a.G.clone()
    g_var = None if a.g_var is None else a.g_var.clone()
    if bool(bt.two.any()):
        i, (_, gi, Gi, gvi) = _exact(bt, bt.two, mu, cov, var, p)
        g[i], G[i] = gi, Gi
        if g_var is not None:
            g_var[i] = gvi
    return g, G, g_var


def user_weights(g, G, g_var, o, V, w, c_v=None):
    """Per row, the weights (λ, ν) of q(w_c,j) for the row's user (Eq. 36–37 with the exact likelihood):
    the member's share of component c is v_c,i w_c,j, so that with o = A_J v̂_c (R, K), V = A_J S_v,c A_Jᵀ
    (R, K, K) and ŵ = ``w`` (R,) the row's moments hold ŵ o, (ŵ² + ω)(V) + ω o oᵀ and, where the item
    side is sparse, the noise c_i / s_v,c (ŵ² + ω) (``c_v`` (R, K); None: none). Then

        λ = −2 ∂E/∂ω = −2 (oᵀ G o + tr(G V) + Σ_i ∂E/∂σ²_i c_i / s_v,c),
        ν = ∂E/∂ŵ + λ ŵ = oᵀ g − 2 ŵ oᵀ G o."""
    oGo = torch.einsum("rk,rkl,rl->r", o, G, o)
    second = oGo + (G * V).sum((-1, -2))
    if c_v is not None:
        second = second + (g_var * c_v).sum(-1)
    return -2.0 * second, (o * g).sum(-1) - 2.0 * w * oGo


def _sweep(st: dict, gam: dict, bt: Rows, p: ChoiceProblem, rho: float, pi: float):
    """q(t), the residual's q(r), q(v_c) for each c, then q(w_c) for each c, on one batch of rows
    (module docstring); with conditional variance, the likelihood's pull on each q(s) at the end
    (the X of :func:`~crowdzoo.gp.conjugate.scale_rate`, as the pairwise sweep's)."""
    Es = {k: s / r for k, (s, r) in gam.items()}
    _, items, users = p.sides
    mem = members(st, bt)
    mu, cov, var = moments(mem, bt, Es, p.conditional)
    a = anchor(bt, mu, cov, var, p)

    def current():
        return derivatives(a, bt, *moments(mem, bt, Es, p.conditional), p)

    if st["t"] is not None:
        g, G, _ = current()
        Lam, eta = block_natural_params(bt.A_J, g, G, mem.o_t)
        st["t"] = natural.step(st["t"], Es["t"] * items.K_inv, pi * Lam, pi * eta, rho, "S_t⁻¹")
        o_t, V_t = item_part(bt.A_J, st["t"].m, st["t"].S)
        mem = mem._replace(o_t=o_t, V_t=V_t)
    if st.get("r") is not None:
        g, G, _ = current()
        st["r"] = residual.choice_step(st["r"], bt.items, bt.mask, g, G, rho, pi, *p.residual)
        mem = mem._replace(r_m=st["r"].q.m[bt.items] * bt.mask, r_S=st["r"].q.S[bt.items] * bt.mask)
    v = st["v"]
    Lam_v, eta_v, m_v, S_v = (x.clone() for x in v)
    o_v, V_v = mem.o_v.clone(), mem.V_v.clone()
    for c in range(m_v.shape[0]):  # Eq. 32–33, components in turn
        g, G, g_var = current()
        w_c = mem.w[:, c]
        noise = None if g_var is None else g_var * (bt.d / Es["w"][c])[:, None]
        Lam, eta = block_natural_params(bt.A_J, g, G, o_v[..., c], w_c, w_c * w_c + mem.w_q[:, c], noise)
        blk = natural.step(natural.Gaussian(Lam_v[c], eta_v[c], m_v[c], S_v[c]), Es["v"][c] * items.K_inv,
                           pi * Lam, pi * eta, rho, f"S_v⁻¹ (component {c})")
        Lam_v[c], eta_v[c], m_v[c], S_v[c] = blk
        o_v[..., c], V_v[:, c] = item_part(bt.A_J, blk.m, blk.S)
        mem = mem._replace(o_v=o_v, V_v=V_v)
    st["v"] = natural.Gaussian(Lam_v, eta_v, m_v, S_v)
    w = st["w"]
    Lam_w, eta_w, m_w, S_w = (x.clone() for x in w)
    w_m, w_q = mem.w.clone(), mem.w_q.clone()
    for c in range(m_w.shape[0]):  # Eq. 36–37
        lam, nu = user_weights(*current(), o_v[..., c], V_v[:, c], w_m[:, c],
                               None if not p.conditional else bt.c_J / Es["v"][c])
        blk = natural.Gaussian(Lam_w[c], eta_w[c], m_w[c], S_w[c])
        if bt.Aw is None:
            blk = ng._step(blk, Es["w"][c], None, lam, nu, rho, pi, j=bt.j)
        else:
            blk = ng._step(blk, Es["w"][c] * users.K_inv, bt.Aw, lam, nu, rho, pi,
                           what=f"Σ⁻¹ (component {c})")
        Lam_w[c], eta_w[c], m_w[c], S_w[c] = blk
        w_m[:, c], w_q[:, c] = (x[:, 0] for x in user_part(natural.Gaussian(None, None, blk.m[None],
                                                                                blk.S[None]), bt))
        mem = mem._replace(w=w_m, w_q=w_q)
    st["w"] = natural.Gaussian(Lam_w, eta_w, m_w, S_w)
    if not p.conditional:
        return st, None
    _, _, g_var = current()
    h = -pi * g_var  # (R, K)
    dw = bt.d[:, None] / Es["w"]
    Ev2 = o_v * o_v + torch.diagonal(V_v, dim1=-2, dim2=-1).transpose(1, 2)  # (R, K, C)
    pull = {"t": (h * bt.c_J).sum()[None] if st["t"] is not None else None,
            "v": ((h * bt.c_J).sum(-1)[:, None] * (w_m * w_m + w_q + dw)).sum(0),
            "w": torch.einsum("rk,r,rkc->c", h, bt.d, Ev2 + bt.c_J[..., None] / Es["v"])}
    return st, pull


def init(problem: ChoiceProblem, gen: torch.Generator) -> ng.State:
    """The pairwise route's start (:func:`~crowdzoo.models.crowdgppl.natgrad.init`)."""
    return ng.init(problem, gen)


def step(state: ng.State, batch: loop.Batch, p: ChoiceProblem):
    """One iteration on the rows ``batch.idx``: the sweep, then every q(s) by Eq. 15."""
    bt = _rows(p, batch.idx)
    st, pull = _sweep(ng._blocks(state), state.gam, bt, p, batch.rho, batch.pi)
    gam = ng._update_scales(st, state.gam, p.pri, p.sides.items, p.sides.users, pull)
    return (ng.State(st["t"], st["v"], st["w"], gam, r=st["r"]),
            ng.Info(batch.rho, {k: s / r for k, (s, r) in gam.items()}))


def bound(state: ng.State, idx, scale: float, p: ChoiceProblem) -> float:
    """Eq. 31 on the rows ``idx``: their expected log-likelihood (exact rule) times ``scale`` less every
    KL term."""
    bt = _rows(p, idx)
    Es = {k: s / r for k, (s, r) in state.gam.items()}
    st = ng._blocks(state)
    mu, cov, var = moments(members(st, bt), bt, Es, p.conditional)
    ell = expected_row_log_lik(mu, cov, bt.mask, bt.best, bt.worst, var, p.n_gh, p.points)[0]
    return float(scale * ell.sum() - ng.kl_terms(st, state.gam, p.pri, p.sides.items, p.sides.users,
                                                  p.residual))


def fit_choices(model, data, seed: int = 0, likelihood: str | None = None, batch_size: int | None = None,
                delay: float = 1.0, forgetting_rate: float | None = None, max_iter: int = 1000,
                min_iter: int = 10, tol: float = 1e-3, eval_every: int = 5, eval_size: int = 2000,
                n_gh: int = 20, init_var: float | None = None, learn_kernel=None,
                rho_min: float | None = None, distributed: bool = False, progress_bar: bool | None = None,
                setup=None, resume=None, checkpoint=None, checkpoint_every: int = 0, callback=None,
                n_points: int = 64, **unused):
    """Fit crowdGPPL to choices by natural-gradient SVI (module docstring). The settings are the pairwise
    route's with its exact likelihood (:func:`~crowdzoo.models.crowdgppl.natgrad.fit_natgrad`: on a full
    batch ρ = 1 and ``init_var`` 0.01, on mini-batches of ``batch_size`` rows the paper's r = 0.9 and the
    prior's variance); ``n_points`` the antithetic pairs of the rule over rows of more than two items
    (GPPL's 64). The length-scales stay fixed (``learn_kernel`` and length-scale priors are refused), in
    one process."""
    if learn_kernel or getattr(model, "lengthscale_prior", None) is not None \
            or getattr(model, "user_lengthscale_prior", None) is not None:
        raise DataError("learn_kernel: choices are fitted with fixed length-scales (the median heuristic or "
                        "lengthscale=); drop {learn_kernel}, lengthscale_prior and user_lengthscale_prior",
                        arg="learn_kernel", settings=("learn_kernel",))
    if likelihood not in (None, "exact"):
        raise DataError("likelihood: choices take the exact likelihood (the probit choice), got "
                        f"{likelihood!r}", arg="likelihood", settings=("likelihood",))
    odd = sorted(k for k in unused if k not in ("kernel_lr", "kernel_batch"))
    if odd or distributed:
        bad = odd[0] if odd else "distributed"
        raise DataError(f"{bad}: natgrad on choices takes no {bad!r} (it runs in one process)", arg=bad)
    if data.users is None:
        raise DataError("users: crowdGPPL needs a user per choice (ChoiceData(..., users=...)); for one "
                        "user's choices fit gppl", arg="users")
    resume, setup = loop.resume_setup(resume, setup, lambda: model.setup(data, seed=seed))
    items, mask, best, worst = choice_tensors(data)
    j = torch.from_numpy(data.users).long()
    R, K = mask.shape
    batch_size = default_batch_size(batch_size, False, R)
    full = batch_size >= R
    init_var = (0.01 if full else 1.0) if init_var is None else init_var
    if not init_var > 0:
        raise DataError(f"init_var: must be positive, got {init_var}", arg="init_var")
    if forgetting_rate is None:
        forgetting_rate = 0.0 if full else 0.9
    pri = {k: require_gamma(d, f"prior_{k}") for k, d in setup.priors.items() if k != "t" or setup.consensus}
    pri.setdefault("t", (1.0, 1.0))
    conditional = not setup.items.exact or (setup.users is not None and not setup.users.exact)
    c = (torch.zeros(setup.N, dtype=DTYPE) if setup.items.exact
         else setup.items.conditional_variance())
    problem = ChoiceProblem(items, mask, best, worst, j, c, Shard(0, 1, 0, R, R, 0), pri,
                            {k: s / r for k, (s, r) in pri.items()}, sides(setup, False), conditional,
                            n_gh, init_var, normal_points(K, n_points, seed) if K > 2 else None,
                            None if setup.residual_prior is None
                            else require_gamma(setup.residual_prior, "shape_r0, rate_r0"))
    settings = loop.Settings(batch_size=batch_size, delay=delay, forgetting_rate=forgetting_rate,
                             max_iter=max_iter, min_iter=min_iter, tol=tol, eval_every=eval_every,
                             eval_size=eval_size, rho_min=rho_floor(rho_min, False, full),
                             progress_bar=progress_bar, checkpoint=checkpoint,
                             checkpoint_every=checkpoint_every, callback=callback)
    res = loop.run(loop.algorithm(init, step, bound, problem, R), settings, seed=seed,
                   what="natgrad crowdGPPL (choices)",
                   advice="a larger {delay} ε or {forgetting_rate} r (smaller steps), a larger {batch_size}, "
                          "or fewer components ({n_components})",
                   advice_settings=("delay", "forgetting_rate", "batch_size", "n_components"),
                   resume=resume, meta=dict(model=model, method="natgrad"), setup=setup)
    return ng._posterior(model, data, res, problem, dict(likelihood="exact", init_var=init_var,
                                                          learn_kernel=False, ranks=1, n_points=n_points))
