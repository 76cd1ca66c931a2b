"""The paper's stochastic variational inference for crowdGPPL (Simpson & Gurevych 2020, Alg. 2).

q factorises as in Eq. 20: q(t_m) q(s_t) Π_c q(v_m,c) q(w_m,c) q(s_v,c) q(s_w,c), Gaussians over
the inducing values and Gammas over the inverse scales. Each iteration draws P_i labels and
updates every factor in turn (t, then v_1..v_C, then w_1..w_C) by a natural-gradient step of
size ρ_i = (i + ε)^(−r) with the batch scaled by π_i = P / P_i (Appendix 3, Eq. 32–37), then
every q(s) in closed form (Eq. 15). State between iterations is O(C(M² + M_u²)) — O(C·U) for
independent users, whose q(w) is diagonal — so memory does not grow with P.

For a factor x with rows A (Jacobian of its own contribution to z_p), every update has the form

    Λ ← (1 − ρ) Λ + ρ (E[s] K⁻¹ + π Aᵀ diag(λ) A),      η ← (1 − ρ) η + ρ π Aᵀ ν

with per-label weights (λ, ν) from the likelihood; κ_p is the factor's multiplier in z_p (1 for
t, ŵ_c,j for v_c, Δv̂_c for w_c), e_p its second moment (1, E[w²_c,j], E[Δv²_c]) and o_p its own
current contribution (Δt̂, Δv̂_c, ŵ_c,j):

``"linearised"`` (the paper, Eq. 32–38): Φ(z) linearised at the mean ẑ with G = φ(ẑ) and the
    beta-Bernoulli noise Q of Eq. 8: λ = G² e / Q, ν = G κ / Q · (y − Φ(ẑ) + G κ o).
``"exact"`` (beyond the paper): z treated as Gaussian with the moments of Eq. 25 and the expected
    log-likelihood E[log Φ(y'z)] by Gauss–Hermite quadrature, derivatives (g_μ, g_v):
    λ = −2 g_v e, ν = g_μ κ − 2 g_v κ² o (the natural gradient in the factor's mean parameters).

The bound of Eq. 31 (likelihood term by Gauss–Hermite quadrature of z's Gaussian closure) is
evaluated on a fixed subset of labels every ``eval_every`` iterations; the run stops when it
changes by less than ``tol`` (relative) or after ``max_iter`` iterations.

``learn_kernel=True`` (beyond the paper, §6's future work; by default where the item side is sparse,
:func:`learns`) learns the item and user kernels' log length-scales (ARD) as GPPL's natgrad does
(:mod:`crowdzoo.models.gppl.natgrad`): one Adam step up the mini-batch bound after each sweep, with q
held fixed in the whitened basis u = L⁻¹ f (where the KL terms do not depend on the length-scales), a
floor under ρ, and the exact likelihood by default.

The order effect (``CrowdGPPL(order_effect=True)``, beyond the paper): q(δ) of the first item's advantage
is one more factor of the sweep, after q(t) and the item residual's q(r): a one-dimensional Gaussian
block with κ_p = e_p = 1 for every label and prior precision 1/σ_δ² (:mod:`crowdzoo.gp.order`), the same
(λ, ν) as the consensus's, and its KL in the bound.

Weights (``PairwiseData.weights``): a label of weight w counts as w copies of it: its (λ, ν) (the
linearised likelihood's through its noise Q/w), its pull on q(s) and τ and its term of the bound are
multiplied by w; τ starts at the weighted share of ties.

The algorithm is module-level and pure (BlackJAX style): :func:`init`, :func:`step` (one iteration on
a :class:`~crowdzoo.inference.natgrad.Batch`: a :class:`State` and an :class:`Info`) and :func:`bound`
on a :class:`Problem` that holds what the fit keeps fixed; every factor is a
:class:`~crowdzoo.gp.natural.Gaussian` block. The route,
:func:`crowdzoo.models.crowdgppl.routes.fit_natgrad`, assembles the problem and one
:class:`~crowdzoo.inference.natgrad.Settings` for the loop of :mod:`crowdzoo.inference.natgrad`, and
builds the posterior.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch.special import ndtr

from ...errors import DataError
from ...gp import natural, order, residual
from ...gp.conjugate import kl_gamma, q_s, scale_rate
from ...gp.learn import KernelSpace, learns_by_default, log_prior_of_theta
from ...gp.linalg import DTYPE, sym
from ...gp.natural import Gaussian
from ...gp.ordinal import expected_log_outcome, initial_tau, threshold_step, threshold_step_groups
from ...gp.probit import beta_bernoulli_Q, expected_log_probit, probit_grads
from ...inference import natgrad as loop
from ...inference.distributed import Shard
from ...inference.hyper import PASS_STEPS, Adam, adam_init, ascend
from .members import Side, Sides, rowquad, sides
from .posterior import CrowdGPPLPosterior


def _to_f(blk: Gaussian, side: Side | None, setup_side):
    """(mean, covariance) of q over the inducing values f from a block in ``side``'s basis."""
    if side is None or not side.whitened:
        return blk.m, blk.S
    L = setup_side.L_mm
    return blk.m @ L.T, sym(L @ blk.S @ L.T)


@dataclass
class CrowdKernels:
    """θ = (item log length-scales, user log length-scales) ↦ a crowdGPPL setup (differentiable)."""

    setup: object
    items: KernelSpace
    users: KernelSpace | None

    @classmethod
    def of(cls, model, data, setup, seed):
        if not model.item_features:
            raise DataError("learn_kernel: the model has no item kernel (item_features=False); set "
                            "item_features=True or {learn_kernel=False}", arg="learn_kernel",
                            settings=("learn_kernel",))
        items = KernelSpace.of(model.item_gp(), data.item_features, setup.items, seed, True, False)
        users = None
        if setup.users is not None:
            users = KernelSpace.of(model.user_gp(), data.user_features, setup.users, seed + 1, True, False)
        return cls(setup, items, users)

    def log_prior(self, model, counted: bool = True):
        """θ ↦ log p(ℓ_items) + log p(ℓ_users) under the model's ``lengthscale_prior`` and
        ``user_lengthscale_prior`` (None where neither is set): the type-II MAP term."""
        n = self.items.theta0.shape[0]
        terms = [log_prior_of_theta(getattr(model, "lengthscale_prior", None), n, 0, counted)]
        if self.users is not None:
            terms.append(log_prior_of_theta(getattr(model, "user_lengthscale_prior", None),
                                            self.users.theta0.shape[0], n, counted))
        terms = [t for t in terms if t is not None]
        return (lambda theta: sum(t(theta) for t in terms)) if terms else None

    @property
    def theta0(self):
        return self.items.theta0 if self.users is None else torch.cat([self.items.theta0, self.users.theta0])

    def build(self, theta):
        n = self.items.theta0.shape[0]
        users = None if self.users is None else self.users.build(theta[n:])
        return dataclasses.replace(self.setup, items=self.items.build(theta[:n]), users=users)

    def learned(self, model, theta):
        n = self.items.theta0.shape[0]
        ell = theta[:n].detach().exp()
        out = {"learned_lengthscale": ell.tolist(), "start_lengthscale": self.items.theta0.exp().tolist()}
        model = dataclasses.replace(model, lengthscale=ell)
        if self.users is not None:
            ell_u = theta[n:].detach().exp()
            out.update(learned_user_lengthscale=ell_u.tolist(),
                       start_user_lengthscale=self.users.theta0.exp().tolist())
            model = dataclasses.replace(model, user_lengthscale=ell_u)
        return model, out


def _step(blk: Gaussian, prior_prec, rows, lam, nu, r_i, pi, j=None, what="S⁻¹", reduce=None,
          present=None) -> Gaussian:
    """One natural-gradient step (:func:`crowdzoo.gp.natural.step`) with the likelihood's natural
    parameters π Σ λ AᵀA, π Σ ν A of the labels: rows (P, M) (or None with user positions j for a
    diagonal block); lam, nu (P,). ``reduce`` sums the labels' statistics over the ranks of a
    distributed fit (:mod:`crowdzoo.inference.distributed`); None: this process holds every label.
    ``present`` (a diagonal block on several ranks): the sorted users of the whole batch, so that
    only their sums cross the ranks (at most P_i numbers, not U)."""
    if rows is None:
        n = blk.Lam.shape[-1]
        if present is not None and reduce is not None:
            pos = torch.searchsorted(present, j)
            lam_c = torch.zeros(present.numel(), dtype=DTYPE).index_add_(0, pos, lam)
            nu_c = torch.zeros(present.numel(), dtype=DTYPE).index_add_(0, pos, nu)
            lam_c, nu_c = reduce(lam_c, nu_c)
            lam_sum = torch.zeros(n, dtype=DTYPE).index_copy_(0, present, lam_c)
            nu_sum = torch.zeros(n, dtype=DTYPE).index_copy_(0, present, nu_c)
            reduce = None  # summed already
        else:
            lam_sum = torch.zeros(n, dtype=DTYPE).index_add_(0, j, lam)
            nu_sum = torch.zeros(n, dtype=DTYPE).index_add_(0, j, nu)
    else:
        lam_sum, nu_sum = (rows.T * lam) @ rows, rows.T @ nu
    if reduce is not None:
        lam_sum, nu_sum = reduce(lam_sum, nu_sum)
    return natural.step(blk, prior_prec, pi * lam_sum, pi * nu_sum, r_i, what)


def _grads(bt, mu, var, n_gh, tau=None):
    """dE/dμ and dE/dv of each label's expected log-likelihood under z ~ N(μ, v): the probit's, or with
    ties the ordinal probit's at threshold ``tau`` (:mod:`crowdzoo.gp.ordinal`); times each label's
    weight ``bt.w`` where the labels have weights."""
    if tau is None:
        g = probit_grads(bt.sgn, mu, var, n_gh)
    else:
        g = expected_log_outcome(bt.y, mu, var, tau, n_gh)[1:3]
    return g if bt.w is None else (g[0] * bt.w, g[1] * bt.w)


def _ell(y, mu, var, n_gh, tau=None):
    """Each label's expected log-likelihood (probit, or ordinal probit with ties)."""
    if tau is None:
        return expected_log_probit(y, mu, var, n_gh)[0]
    return expected_log_outcome(y, mu, var, tau, n_gh)[0]


def _weights(lik, bt, mu, var, kappa, e, own, Q, n_gh, tau=None):
    """Per-label (λ, ν) of the module docstring for one factor of batch ``bt``."""
    if lik == "linearised":
        G = torch.exp(-0.5 * mu * mu) / math.sqrt(2 * math.pi)
        Gk = G * kappa
        return G * G * e / Q, Gk / Q * (bt.y - ndtr(mu) + Gk * own)
    g_mu, g_v = _grads(bt, mu, var, n_gh, tau)
    h = -2.0 * g_v
    return h * e, kappa * (g_mu + h * kappa * own)


class Batch(NamedTuple):
    dA: torch.Tensor  # (P, M) item-difference rows
    c: torch.Tensor  # (P,) conditional variance of the item difference (× 1/s)
    Aw: torch.Tensor | None  # (P, M_u) user rows, None for independent users
    d: torch.Tensor  # (P,) user conditional variance (× 1/s)
    j: torch.Tensor  # (P,) user positions
    y: torch.Tensor
    sgn: torch.Tensor  # (P,) 2y − 1
    a: torch.Tensor  # (P,) item positions (the item residual's)
    b: torch.Tensor
    w: torch.Tensor | None = None  # (P,) the labels' weights, or None: every label 1


def _batch(setup, items: Side, users: Side | None, a, b, j, y, w=None) -> Batch:
    dA, c = setup.items.pair_terms(a, b) if items.whitened else setup.items.pair_rows(a, b)
    if users is None:
        return Batch(dA, c, None, torch.zeros_like(c), j, y, 2.0 * y - 1.0, a, b, w)
    Aw = users.A[j]
    e, d = setup.user_terms(j)
    return Batch(dA, c, Aw, d, j, y, 2.0 * y - 1.0, a, b, w)


def _weighted(x, bt: Batch):
    """Each label's ``x`` times its weight (x itself without weights)."""
    return x if bt.w is None else x * bt.w


class Moments(NamedTuple):
    """Per-label moments under q: Δt (P,), Δv_c and w_c (P, C), with variances."""

    dt: torch.Tensor
    dt_var: torch.Tensor
    dv: torch.Tensor
    dv_var: torch.Tensor
    w: torch.Tensor
    w_var: torch.Tensor
    dr: torch.Tensor | float = 0.0  # r_a − r_b of the item residual and its variance (0: none)
    dr_var: torch.Tensor | float = 0.0
    do: torch.Tensor | float = 0.0  # the order effect δ's mean and variance (0: none)
    do_var: torch.Tensor | float = 0.0


class Raw(NamedTuple):
    """Per-label means under q and their row quadratics x S xᵀ: the :class:`Moments` before the
    conditional variances, which scale with 1/E[s] (``dt_q`` None: no consensus)."""

    dt: torch.Tensor
    dt_q: torch.Tensor | None
    dv: torch.Tensor
    dv_q: torch.Tensor
    w: torch.Tensor
    w_q: torch.Tensor
    dr: torch.Tensor | float = 0.0  # r_a − r_b of the item residual and its variance (0: none)
    dr_var: torch.Tensor | float = 0.0
    do: torch.Tensor | float = 0.0  # the order effect δ's mean and variance (0: none)
    do_var: torch.Tensor | float = 0.0


def _row_moments(A, m, S):
    """A m and the row-wise A S Aᵀ of one Gaussian block: the products :func:`_sweep` takes."""
    return A @ m, ((A @ S) * A).sum(-1)


def _per_component(A, blk: Gaussian, batched: bool):
    """(A m_c, row-wise A S_c Aᵀ) for every component, (P, C) each: component by component with
    :func:`_row_moments` (the sweep's very products, so that moments carried over from a sweep and
    moments computed afresh agree bit for bit and a resumed fit retraces an uninterrupted one), or
    ``batched`` (fewer nodes for autograd)."""
    if batched:
        return A @ blk.m.T, rowquad(A, blk.S)
    means, quads = zip(*(_row_moments(A, m, S) for m, S in zip(blk.m, blk.S)))
    return torch.stack(means, 1), torch.stack(quads, 1)


def _raw(st, bt: Batch, batched: bool = False) -> Raw:
    t = st["t"]
    dt, dt_q = (torch.zeros_like(bt.y), None) if t is None else _row_moments(bt.dA, t.m, t.S)
    dv, dv_q = _per_component(bt.dA, st["v"], batched)
    w = st["w"]
    if bt.Aw is None:
        wm, w_q = w.m[:, bt.j].T, w.S[:, bt.j].T
    else:
        wm, w_q = _per_component(bt.Aw, w, batched)
    dr, dr_var = residual.pair_moments(st.get("r"), bt.a, bt.b)
    do, do_var = order.moments(st.get("delta"))
    return Raw(dt, dt_q, dv, dv_q, wm, w_q, dr, dr_var, do, do_var)


def _moments(raw: Raw, bt: Batch, Es_t, Es_v, Es_w) -> Moments:
    dt_var = torch.zeros_like(raw.dt) if raw.dt_q is None else raw.dt_q + bt.c / Es_t
    return Moments(raw.dt, dt_var, raw.dv, raw.dv_q + bt.c[:, None] / Es_v, raw.w,
                   raw.w_q + bt.d[:, None] / Es_w, raw.dr, raw.dr_var, raw.do, raw.do_var)


def _total(mo: Moments):
    mean = mo.dt + mo.dr + (mo.dv * mo.w).sum(-1)
    var = mo.dt_var + mo.dr_var + (mo.dv_var * (mo.w * mo.w + mo.w_var) + mo.dv * mo.dv * mo.w_var).sum(-1)
    if isinstance(mo.do, torch.Tensor):  # the order effect δ, the same for every label
        mean, var = mean + mo.do, var + mo.do_var
    return mean, var


def _kl_gauss(blk: Gaussian, side: Side | None, Es, Elog_s):
    """E_q[ln q(x)] − E_q(x)q(s)[ln p(x | s)] for prior N(0, K/s) (the Eq. 30/31 terms); batched
    over components; ``side`` None means K = I with diagonal q."""
    if side is None:
        return natural.kl(blk, None, 0.0, Es, Elog_s)
    return natural.kl(blk, side.K_inv, side.logdet, Es, Elog_s)


class Carried(NamedTuple):
    """The last sweep's :class:`Raw` moments of its batch ``idx`` (this rank's label positions) under
    the q it left: the next step on the same labels (every iteration of a full-batch fit, and the
    bound on them) starts from them instead of recomputing them."""

    idx: torch.Tensor
    raw: Raw


class Problem(NamedTuple):
    """What a crowdGPPL fit holds fixed: this rank's labels (a, b, user j, y), the Gamma priors
    (α₀, β₀) of every scale and their means ``E0``, the prior variance of z that fixes Q (Eq. 8), the
    :class:`Sides` at the model's kernels, whether labels carry conditional variance, the kernels'
    space when θ learns (``space``, ``log_prior``, ``kernel_lr``) and the route's options."""

    a: torch.Tensor
    b: torch.Tensor
    j: torch.Tensor
    y: torch.Tensor
    shard: Shard
    pri: dict
    E0: dict
    prior_var_z: float
    sides: Sides
    conditional: bool
    likelihood: str = "linearised"
    n_gh: int = 20
    init_var: float = 1.0
    space: CrowdKernels | None = None
    log_prior: Callable | None = None
    kernel_lr: float = 0.1
    kernel_batch: int | None = None  # labels per Adam step on θ (the batch's first ones); None: all
    every: tuple | None = None  # (Batch, Q) of all this rank's labels at ``sides``, when θ is fixed
    tie_prior: object = None  # the prior of τ when the labels have ties (a third outcome), else None
    tie_steps: int = 3  # Newton steps on log τ per iteration
    residual: tuple | None = None  # the Gamma prior (α_r, β_r) of the item residual's s_r, or None
    w: torch.Tensor | None = None  # this rank's labels' weights, or None: every label 1

    def weights(self, idx):
        """The weights of this rank's labels ``idx``, or None where every label weighs 1."""
        return None if self.w is None else self.w[idx]

    @property
    def order_prior(self) -> tuple | None:
        """(μ_δ, σ_δ²) of the order effect δ, from the setup's prior (None: no order effect)."""
        prior = getattr(self.sides.setup, "order_prior", None)
        return None if prior is None else order.moments_of(prior)

    @property
    def reduce(self):
        """Sums over the ranks of a distributed fit (None in one process)."""
        return self.shard.sum if self.shard.world > 1 else None


class State(NamedTuple):
    """Between iterations: the Gaussian blocks of t (or None), v_c and w_c, and the Gamma q(s)
    (shape, rate) of every scale; θ and its Adam moments when the kernels learn, with the
    :class:`Sides` at that θ; the last sweep's moments (:class:`Carried`)."""

    t: Gaussian | None
    v: Gaussian
    w: Gaussian
    gam: dict
    hyper: Adam | None = None
    sides: Sides | None = None  # None: the problem's (θ fixed)
    carried: Carried | None = None
    tau: torch.Tensor | None = None  # the crowd's tie threshold, when the labels have ties
    r: residual.Residual | None = None  # q(r), q(s_r) of the item residual, when the model has one
    delta: order.Order | None = None  # q(δ) of the order effect, when the model has one


class Info(NamedTuple):
    """What a step did: its step size ρ_i and E[s] of every scale after it."""

    rho: float
    s: dict


def _sides_of(state: State, p: Problem) -> Sides:
    return p.sides if state.sides is None else state.sides


def _blocks(state: State) -> dict:
    return {"t": state.t, "v": state.v, "w": state.w, "r": state.r, "delta": state.delta}


def _labels(p: Problem, idx, sides: Sides):
    """The batch of this rank's labels ``idx`` at ``sides`` and its Q (Eq. 8); the problem's own when
    ``idx`` is every label (a full-batch step, or the bound on every label) and θ is fixed."""
    if p.every is not None and loop.is_every(idx, p.a.shape[0]):
        return p.every
    bt = _batch(*sides, p.a[idx], p.b[idx], p.j[idx], p.y[idx], p.weights(idx))
    var_z = p.prior_var_z + (0.0 if p.order_prior is None else p.order_prior[1])  # σ_δ² with the order effect
    Q = beta_bernoulli_Q(torch.full_like(bt.y, var_z), bt.y)
    return bt, Q if bt.w is None else Q / bt.w  # w copies of a Gaussian pseudo-observation: noise Q/w


def _raw_of(state: State, idx, bt: Batch) -> Raw:
    """The state's raw moments on the labels ``idx``: the last sweep's if it ran on them."""
    kept = state.carried
    if kept is not None and kept.idx.shape == idx.shape and torch.equal(kept.idx, idx):
        return kept.raw
    return _raw(_blocks(state), bt)


def init(problem: Problem, gen: torch.Generator) -> State:
    """The prior for t; for v_c and w_c the prior's covariance times ``init_var``, with user-component
    means drawn from that Gaussian to break the symmetry V = W = 0 (where every gradient of the
    factorisation vanishes)."""
    p, E0, init_var = problem, problem.E0, problem.init_var
    setup, items, users = p.sides
    M, C, M_u = setup.M, setup.C, setup.M_u
    t = None
    if setup.consensus:
        t = natural.gaussian(E0["t"] * items.K_inv, torch.zeros(M, dtype=DTYPE), "S_t⁻¹")
    v = natural.gaussian((E0["v"] / init_var * items.K_inv).expand(C, M, M).clone(),
                         torch.zeros(C, M, dtype=DTYPE), "S_v⁻¹")
    eps = torch.randn(C, M_u, generator=gen, dtype=DTYPE) * math.sqrt(init_var / E0["w"])
    if users is None:
        Lam_w = torch.full((C, M_u), E0["w"] / init_var, dtype=DTYPE)
        w = natural.gaussian(Lam_w, Lam_w * eps, "Σ⁻¹")
    else:
        Lam_w = (E0["w"] / init_var * users.K_inv).expand(C, M_u, M_u).clone()
        w0 = eps if users.whitened else eps @ setup.users.L_mm.T
        w = natural.gaussian(Lam_w, (Lam_w @ w0[..., None])[..., 0], "Σ⁻¹")
    gam = {k: (torch.full((1 if k == "t" else C,), s, dtype=DTYPE),
               torch.full((1 if k == "t" else C,), r, dtype=DTYPE)) for k, (s, r) in p.pri.items()}
    tau = None
    if p.tie_prior is not None:
        tau = initial_tau(p.shard.tie_share(p.y, p.w))
        if setup.tie_per_user:  # every user starts at the crowd's share of ties
            tau = tau.expand(setup.n_users).clone()
    r = None if p.residual is None else residual.init(setup.N, *p.residual, init_var)
    prior_d = getattr(p, "order_prior", None)  # the choices' problem has none
    delta = None if prior_d is None else order.init(prior_d)
    return State(t, v, w, gam, None if p.space is None else adam_init(p.space.theta0), tau=tau, r=r,
                 delta=delta)


def step(state: State, batch: loop.Batch, problem: Problem) -> tuple[State, Info]:
    """One iteration of Alg. 2 on the labels ``batch.idx``: every Gaussian factor in turn (Eq. 32–37,
    :func:`_sweep`), every q(s) (Eq. 15), then, when θ learns, one Adam step up the batch's bound."""
    p = problem
    sides = _sides_of(state, p)
    idx = p.shard.local(batch.idx)
    bt, Q = _labels(p, idx, sides)
    # the batch's users, on several ranks with independent users
    present = p.shard.union(bt.j) if p.reduce is not None and sides.users is None else None
    st, pull, raw = _sweep(_blocks(state), state.gam, bt, _raw_of(state, idx, bt), sides.items, sides.users,
                           p.likelihood, Q, batch.rho, batch.pi, p.n_gh, p.reduce, present, p.conditional,
                           label_tau(state.tau, bt.j), p.residual, p.order_prior)
    gam = _update_scales(st, state.gam, p.pri, sides.items, sides.users, pull)
    tau = state.tau
    if tau is not None:  # ties: Newton steps on log τ at the new q (full ones on a full batch)
        Es = {k: s / r for k, (s, r) in gam.items()}
        mu, var = _total(_moments(raw, bt, Es["t"], Es["v"], Es["w"]))
        full = loop.is_every(batch.idx, p.shard.n_labels)
        pi = _weighted(batch.pi, bt)
        if tau.dim():  # a τ per user, each from its user's labels
            tau = threshold_step_groups(tau, bt.j, bt.y, mu, var, pi, p.tie_prior, p.tie_steps, p.n_gh,
                                        p.reduce, 1.0 if full else batch.rho)
        else:
            tau = threshold_step(tau, bt.y, mu, var, pi, p.tie_prior, p.tie_steps, p.n_gh, p.reduce,
                                 1.0 if full else batch.rho)
    new = State(st["t"], st["v"], st["w"], gam, state.hyper, state.sides,
                Carried(idx, raw) if state.hyper is None else None, tau, st["r"], st["delta"])
    if state.hyper is not None:
        new = _kernel_step(new, idx, batch.pi, p)
    return new, Info(batch.rho, {k: s / r for k, (s, r) in gam.items()})


def _kernel_step(state: State, idx, pi, p: Problem) -> State:
    """One Adam step of the kernels' log length-scales up the batch's expected log-likelihood (plus
    log p(ℓ)) with q held in the whitened basis (where the KL terms do not depend on θ), and the
    :class:`Sides` at the new θ. With ``p.kernel_batch`` the gradient is the one of the batch's first
    ``kernel_batch`` labels, scaled up to the batch: the batch is a uniform draw, so its first labels
    are one too, and the step's cost stops growing with P_i (:func:`default_kernel_batch`)."""
    Es = {k: s / r for k, (s, r) in state.gam.items()}
    st = _blocks(state)
    share = None if p.kernel_batch is None else p.kernel_batch * p.a.shape[0] / p.shard.n_labels
    if share is not None and idx.shape[0] > share:  # share: this rank's part of kernel_batch
        k = max(1, math.ceil(share))
        idx, pi = idx[:k], pi * idx.shape[0] / k

    def likelihood_term(theta):
        s_th = p.space.build(theta)
        b_th = _batch(*sides(s_th, True), p.a[idx], p.b[idx], p.j[idx], p.y[idx], p.weights(idx))
        mu, var = _total(_moments(_raw(st, b_th, batched=True), b_th, Es["t"], Es["v"], Es["w"]))
        ell = pi * _weighted(_ell(b_th.y, mu, var, p.n_gh, label_tau(state.tau, b_th.j)), b_th).sum()
        return ell if p.log_prior is None else ell + p.log_prior(theta)  # type-II MAP under a prior

    hyper = ascend(state.hyper, likelihood_term, p.kernel_lr, p.reduce)
    with torch.no_grad():
        new = sides(p.space.build(hyper.theta), True)
    return state._replace(hyper=hyper, sides=new)


def bound(state: State, idx, scale: float, problem: Problem) -> float:
    """Eq. 31 on the labels ``idx``, their likelihood term times ``scale`` (:func:`_bound`)."""
    p = problem
    sides = _sides_of(state, p)
    idx = p.shard.local(idx)
    bt, _ = _labels(p, idx, sides)
    return _bound(_blocks(state), state.gam, p.pri, bt, _raw_of(state, idx, bt), sides.items, sides.users,
                  scale, p.n_gh, p.reduce, label_tau(state.tau, bt.j), p.residual, p.order_prior)


def label_tau(tau, j):
    """Each label's tie threshold: the crowd's τ, or with a τ per user (U,) that of the label's user j."""
    return tau if tau is None or tau.dim() == 0 else tau[j]


def default_likelihood(learn_kernel: bool, batch_size: int, data, setup=None) -> str:
    """The likelihood the route (:func:`crowdzoo.models.crowdgppl.routes.fit_natgrad`) uses unless told:
    ``"exact"`` when the kernel learns (θ's gradient is the bound's), for ties, when every label fits one
    batch, or where the item or user side is sparse; the paper's ``"linearised"`` with mini-batches over
    every item and user inducing.

    On a full batch the exact likelihood takes full natural-gradient steps (ρ = 1) and meets the stop
    rule in tens of iterations. Under the default priors it is as accurate as the linearised route or
    more on the calibration battery's crowds that fit one batch, sparse ones included (sushi-like, 8
    labels per user: held-out log loss .379/.396 against .419/.481 on two seeds; ties, no-features,
    irrelevant features likewise; ``crowdzoo compare calibration``). Under the paper's priors its
    mean-field optimum was over-confident with a handful of labels per user (docs/crowdgppl.md, "How
    far to run"), which is why the paper's route stays one argument away.

    A sparse item side gives each label the conditional variance c_p / s of Eq. 19, which the
    linearisation about the mean (Eq. 32–38) leaves out while predictions (Eq. 25, 3) include it, so
    the linearised route's probabilities come out too close to ½ (GPPL's
    :func:`~crowdzoo.models.gppl.natgrad.default_likelihood`). On 197,839 labels of a 600-item,
    4,000-user crowd with low-rank tastes (``benchmarks/bench_panel_fit.py``, 450 inducing items) the
    held-out personal log loss was .479 linearised and .439 exact (the items' win rates: .529). Users
    with features on a sparse user side (more users than inducing users) carry the conditional
    variance d_p / s_w of theirs in the same way, so they, too, take the exact likelihood. So does a model
    with the order effect, whose δ the linearisation shrinks (GPPL's
    :func:`~crowdzoo.models.gppl.natgrad.default_likelihood`)."""
    if learn_kernel or data.has_ties:  # ties: only the exact likelihood has a third outcome
        return "exact"
    if setup is not None and getattr(setup, "order_prior", None) is not None:
        return "exact"
    if setup is not None and (not setup.items.exact or (setup.users is not None and not setup.users.exact)):
        return "exact"  # a sparse side's conditional variance, which only the exact likelihood feels
    held = getattr(data, "label_range", None)
    P = held[2] if held is not None else len(data.a)
    return "exact" if batch_size >= P else "linearised"


#: the most labels at which a sparse item side learns its length-scales in the fit by default: up to here
#: each step takes the paper's 1000 labels (:func:`~crowdzoo.inference.hyper.default_batch_size`)
LEARN_SPARSE_LABELS = 1000 * PASS_STEPS
#: ``learn_kernel`` for item length-scales learned before the fit from pooled labels (:func:`pooled`)
POOLED = "pooled"
#: the labels, drawn at random, on which :func:`pooled` fits GPPL
POOLED_LABELS = 10_000


def default_kernel_batch(kernel_batch: int | None) -> int:
    """The labels per Adam step on the length-scales unless given: the paper's batch of 1000. Above
    2·10⁵ labels the natural-gradient batches grow to P / 200 (one pass in 200 steps), while the
    length-scales' gradient needs no more labels there than below; its cost is that of the batch's
    C per-component row quadratics, forward and backward."""
    if kernel_batch is None:
        return 1000
    if int(kernel_batch) != kernel_batch or kernel_batch < 1:
        raise DataError(f"kernel_batch: expected a positive integer (labels per length-scale step), got "
                        f"{kernel_batch!r}", arg="kernel_batch")
    return int(kernel_batch)


def learns(model, data, setup, learn_kernel: bool | str | None = None, resume=None) -> bool | str:
    """``learn_kernel`` as given (True, False or ``"pooled"``), or unset: where the item side is sparse
    (M < N inducing items) and the model leaves the item length-scales to the median heuristic on
    items with features (:func:`~crowdzoo.gp.learn.learns_by_default`), True (learned in the fit) up
    to :data:`LEARN_SPARSE_LABELS` labels and ``"pooled"`` (learned before it, :func:`pooled`) above;
    True wherever the model has a ``lengthscale_prior`` (whose MAP the route then finds); False
    elsewhere. A resumed run does as its first run did.

    With M inducing items in many feature dimensions, median-heuristic length-scales leave the
    components v_c too smooth to carry personal tastes: on 197,944 labels of a 3,000-item, 4,000-user
    crowd with low-rank tastes over 16 features, half irrelevant (``benchmarks/bench_panel_fit.py
    3000 4000``), the personal predictions equalled the consensus's (held-out log loss .470 both; 800
    inducing items: .470), against .387 personal (accuracy .817 against .771) with learned
    length-scales, in twice the time; the items' win rates score .535. On the 991,668 labels of
    the same crowd with 20,000 users (``benchmarks/bench_pooled_lengthscales.py``), learning in the
    fit reached .334 personal but had not converged after 1,000 iterations (506 s on 2 cores of a
    Xeon), where :func:`pooled` reached .364 in 117 s, converged, against .457 (personal = consensus)
    for the median heuristic in 84 s. Where every item is inducing the components are free per item,
    and one shared set of length-scales for all C components over-smoothed them (docs/crowdgppl.md),
    so the median heuristic stays there."""
    if learn_kernel is not None:
        if isinstance(learn_kernel, str):
            if learn_kernel != POOLED:
                raise DataError(f"learn_kernel: expected True, False or {POOLED!r}, got {learn_kernel!r}",
                                arg="learn_kernel")
            return POOLED
        return bool(learn_kernel)
    ckpt = loop.read_checkpoint(resume)
    if ckpt is not None and ckpt["state"].hyper is not None:  # q lives in the whitened basis θ needs
        return True
    if not model.item_features:
        return False
    if getattr(model, "lengthscale_prior", None) is not None:
        return True
    held = getattr(data, "label_range", None)
    P = held[2] if held is not None else len(data.a)
    if setup.items.exact or not learns_by_default(model.item_gp(), data.item_features):
        return False
    if P > LEARN_SPARSE_LABELS:
        return POOLED
    return ckpt is None  # a resumed run without θ's optimiser kept its kernel fixed


def pooled(model, data, setup, seed: int, sh: Shard, resumed: bool):
    """The item length-scales learned before the fit, from the labels pooled over users: GPPL
    (:meth:`~crowdzoo.CrowdGPPL.item_gp`, Chu & Ghahramani 2005) fitted with ``learn_kernel=True`` to
    :data:`POOLED_LABELS` labels drawn at random (type-II maximum likelihood of the consensus's ARD
    length-scales), then fixed: features that move the consensus get short length-scales, the others
    long ones, and the components v_c take the same. ``(model with those length-scales, its setup,
    settings)``; a resumed run reads them from its checkpoint's setup. On several ranks the first
    rank alone fits, on a draw from its shard, and every rank takes its length-scales."""
    n = min(POOLED_LABELS, len(data.a))
    if resumed:
        ell = setup.items.kernel.lengthscale.detach().clone()
    else:
        ell = torch.zeros(np.asarray(data.item_features).shape[1], dtype=DTYPE)
        if sh.lead:  # the other ranks wait for the first one's length-scales
            from ..gppl.natgrad import fit_natgrad as fit_gppl

            rows = np.sort(np.random.default_rng(seed).choice(len(data.a), size=n, replace=False))
            gppl = fit_gppl(model.item_gp(), data.subset(rows), seed=seed, learn_kernel=True,
                            progress_bar=False)
            ell = torch.as_tensor(gppl.settings["learned_lengthscale"], dtype=DTYPE)
        if sh.world > 1:
            ell = sh.sum(ell)
    model = dataclasses.replace(model, lengthscale=ell)
    setup = setup if resumed else model.setup(data, seed=seed)
    return model, setup, {"pooled_lengthscale": ell.tolist(), "pooled_labels": n}


def _posterior(model, data, res: loop.Result, problem: Problem, settings: dict) -> CrowdGPPLPosterior:
    """The posterior of a finished run: every factor in f's coordinates, the q(s), the learned kernels."""
    st = res.state
    Es = {k: s / r for k, (s, r) in st.gam.items()}
    setup, items, users = _sides_of(st, problem)
    t_m, t_S = (None, None) if st.t is None else _to_f(st.t, items, setup.items)
    v_m, v_S = _to_f(st.v, items, setup.items)
    w_m, w_S = _to_f(st.w, users, setup.users)
    learned = {}
    if problem.space is not None:
        model, learned = problem.space.learned(model, st.hyper.theta)
    return CrowdGPPLPosterior(
        model=model, setup=setup, data=data, method="natgrad", weights=torch.ones(1, dtype=DTYPE),
        t_m=None if t_m is None else t_m[None], v_m=v_m[None], w_m=w_m[None],
        s_t=Es["t"] if setup.consensus else None, s_v=Es["v"][None], s_w=Es["w"][None],
        t_cov=t_S, v_cov=v_S, w_cov=w_S,
        gamma={k: (s if k != "t" else s[0], r if k != "t" else r[0]) for k, (s, r) in st.gam.items()
               if k != "t" or setup.consensus},
        trace={"bound": np.asarray(res.stop.bounds), "bound_iteration": np.asarray(res.stop.iterations)},
        settings=dict(**settings, **learned, **res.settings), checkpoint=res.checkpoint,
        tau=None if st.tau is None else st.tau.reshape(1, -1) if st.tau.dim() else st.tau.reshape(1),
        **({} if st.r is None else dict(r_means=st.r.q.m[None], r_vars=st.r.q.S[None],
                                        s_r=st.r.Es.reshape(1))),
        **({} if st.delta is None else dict(order_means=st.delta.q.m.clone(),
                                            order_vars=st.delta.q.S.clone())))


def _terms(dv, dv_var, w, w_var, Ew2=None):
    """Mean and variance of the component terms Δv_c w_c,j (Eq. 25), elementwise (``Ew2``: E[w²]
    = w² + var w, if already at hand)."""
    return dv * w, dv_var * (w * w + w_var if Ew2 is None else Ew2) + dv * dv * w_var


def _sweep(st, gam, bt: Batch, raw: Raw, items: Side, users, lik, Q, r_i, pi, n_gh, reduce=None,
           present=None, conditional: bool = True, tau=None, res_prior=None, order_prior=None):
    """Update q(t), then q(v_c) for each c, then q(w_c) for each c, on one batch (the factors in
    turn, as coordinate ascent does; the total moments of z are kept up to date in between).
    ``raw``: the batch's :class:`Raw` moments under the state ``st``; returned with the new state's.
    ``reduce``: sums each factor's label statistics over the ranks of a distributed fit (each rank
    holds its own labels' moments of z, updated locally after every factor's step). ``conditional``:
    whether a side is sparse, so that labels carry conditional variance (c or d ≠ 0) whose pull on
    q(s) the ``"exact"`` likelihood adds. ``tau``: the tie threshold, for labels with ties (the
    exact likelihood's ordinal probit). ``res_prior``: (α_r, β_r) of the item residual, whose q(r)
    steps after q(t) (:mod:`crowdzoo.gp.residual`); ``order_prior``: (μ_δ, σ_δ²) of the order effect,
    whose q(δ) steps next (:mod:`crowdzoo.gp.order`)."""
    Es = {k: s / r for k, (s, r) in gam.items()}
    mo = _moments(raw, bt, Es["t"], Es["v"], Es["w"])
    mu, var = _total(mo)
    dv, dv_q, dv_var = raw.dv.clone(), raw.dv_q.clone(), mo.dv_var.clone()
    wm, w_q, w_var = raw.w.clone(), raw.w_q.clone(), mo.w_var.clone()
    dt, dt_q = raw.dt, raw.dt_q
    if st["t"] is not None:
        one = torch.ones_like(mu)
        lam, nu = _weights(lik, bt, mu, var, one, one, mo.dt, Q, n_gh, tau)
        st["t"] = _step(st["t"], Es["t"] * items.K_inv, bt.dA, lam, nu, r_i, pi, what="S_t⁻¹", reduce=reduce)
        dt, dt_q = _row_moments(bt.dA, st["t"].m, st["t"].S)
        dt_var = dt_q + bt.c / Es["t"]
        mu, var = mu + dt - mo.dt, var + dt_var - mo.dt_var
    dr, dr_var = raw.dr, raw.dr_var
    if st.get("r") is not None:
        st["r"] = _residual_step(st["r"], bt, mu, var, lik, Q, n_gh, tau, r_i, pi, res_prior, reduce)
        new_dr, new_var = residual.pair_moments(st["r"], bt.a, bt.b)
        mu, var = mu + new_dr - dr, var + new_var - dr_var
        dr, dr_var = new_dr, new_var
    do, do_var = raw.do, raw.do_var
    if st.get("delta") is not None:  # κ_p = e_p = 1: the consensus's weights at δ's own mean
        one = torch.ones_like(mu)
        lam, nu = _weights(lik, bt, mu, var, one, one, st["delta"].m, Q, n_gh, tau)
        sums = (lam.sum(), nu.sum()) if reduce is None else reduce(lam.sum(), nu.sum())
        st["delta"] = order.step(st["delta"], *sums, r_i, pi, order_prior)
        mu, var = mu + st["delta"].m - do, var + st["delta"].S - do_var
        do, do_var = st["delta"].m, st["delta"].S
    v, w = st["v"], st["w"]
    prior_v, c_v = Es["v"][:, None, None] * items.K_inv, bt.c[:, None] / Es["v"]
    Lam_v, eta_v, m_v, S_v = (x.clone() for x in v)
    for c in range(v.m.shape[0]):  # components in turn (Eq. 32–33); vectorised over labels
        w_c, wv_c = wm[:, c], w_var[:, c]
        e = w_c * w_c + wv_c  # E[w²_c,j]
        old_mu, old_var = _terms(dv[:, c], dv_var[:, c], w_c, wv_c, e)
        lam, nu = _weights(lik, bt, mu, var, w_c, e, dv[:, c], Q, n_gh, tau)
        blk = _step(Gaussian(Lam_v[c], eta_v[c], m_v[c], S_v[c]), prior_v[c], bt.dA,
                    lam, nu, r_i, pi, what=f"S_v⁻¹ (component {c})", reduce=reduce)
        Lam_v[c], eta_v[c], m_v[c], S_v[c] = blk
        dv[:, c], dv_q[:, c] = _row_moments(bt.dA, blk.m, blk.S)
        dv_var[:, c] = dv_q[:, c] + c_v[:, c]
        new_mu, new_var = _terms(dv[:, c], dv_var[:, c], w_c, wv_c, e)
        mu, var = mu + (new_mu - old_mu), var + (new_var - old_var)
    st["v"] = Gaussian(Lam_v, eta_v, m_v, S_v)
    Lam_w, eta_w, m_w, S_w = (x.clone() for x in w)
    for c in range(w.m.shape[0]):  # Eq. 36–37
        old_mu, old_var = _terms(dv[:, c], dv_var[:, c], wm[:, c], w_var[:, c])
        e = dv[:, c] ** 2 + dv_var[:, c]
        lam, nu = _weights(lik, bt, mu, var, dv[:, c], e, wm[:, c], Q, n_gh, tau)
        if bt.Aw is None:
            blk = _step(Gaussian(Lam_w[c], eta_w[c], m_w[c], S_w[c]), Es["w"][c], None, lam, nu, r_i,
                        pi, j=bt.j, reduce=reduce, present=present)
            wm[:, c], w_q[:, c] = blk.m[bt.j], blk.S[bt.j]
        else:
            blk = _step(Gaussian(Lam_w[c], eta_w[c], m_w[c], S_w[c]), Es["w"][c] * users.K_inv, bt.Aw,
                        lam, nu, r_i, pi, what=f"Σ⁻¹ (component {c})", reduce=reduce)
            wm[:, c], w_q[:, c] = _row_moments(bt.Aw, blk.m, blk.S)
        w_var[:, c] = w_q[:, c] + bt.d / Es["w"][c]
        Lam_w[c], eta_w[c], m_w[c], S_w[c] = blk
        new_mu, new_var = _terms(dv[:, c], dv_var[:, c], wm[:, c], w_var[:, c])
        mu, var = mu + (new_mu - old_mu), var + (new_var - old_var)
    st["w"] = Gaussian(Lam_w, eta_w, m_w, S_w)
    raw = Raw(dt, dt_q, dv, dv_q, wm, w_q, dr, dr_var, do, do_var)
    if lik != "exact" or not conditional:  # no conditional variance: Eq. 15 as is
        return st, None, raw
    # ∂ELL/∂var_p · (what each scale's conditional variance adds to var_p, times E[s]): the
    # likelihood's pull on q(s) (see _update_scales)
    h = -pi * _grads(bt, mu, var, n_gh, tau)[1]
    pull = {"t": (h * bt.c).sum()[None] if st["t"] is not None else torch.zeros(1, dtype=DTYPE),
            "v": h @ (bt.c[:, None] * (wm * wm + w_var)),
            "w": h @ (bt.d[:, None] * (dv * dv + dv_var))}
    if reduce is not None:
        pull = dict(zip(("t", "v", "w"), reduce(pull["t"], pull["v"], pull["w"])))
    if st["t"] is None:
        pull["t"] = None
    return st, pull, raw


def _residual_step(r: residual.Residual, bt: Batch, mu, var, lik, Q, n_gh, tau, r_i, pi, res_prior,
                   reduce=None) -> residual.Residual:
    """One natural-gradient step of the item residual's q(r) and q(s_r) at the labels' moments (μ, v) of
    z (:mod:`crowdzoo.gp.residual`; the weights of :func:`_weights` with κ = ±1)."""
    if lik == "linearised":
        weights = residual.linearised_weights(mu, Q, bt.y, r, bt.a, bt.b)
    else:
        weights = residual.exact_weights(*_grads(bt, mu, var, n_gh, tau), r, bt.a, bt.b)
    return residual.step(r, bt.a, bt.b, *weights, r_i, pi, *res_prior, reduce=reduce)


def _update_scales(st, gam, pri, items, users, pull=None):
    """q(s) = Gamma(α₀ + n/2, β₀ + ½ tr(K⁻¹ E[x xᵀ])) for every scale (Eq. 15); with ``pull``
    (the ``"exact"`` likelihood: X of :func:`~crowdzoo.gp.conjugate.scale_rate` per scale,
    k_p = 1 for t, E[w²_c,j] for v_c, E[Δv²_c] for w_c) the rate that also feels the likelihood."""
    out = dict(gam)
    for k, side in (("t", items), ("v", items), ("w", users)):
        blk = st[k]
        if blk is None:
            continue
        a0, b0 = pri[k]
        second = natural.second(blk, None if side is None else side.K_inv).reshape(-1)
        shape, rate = q_s(a0, b0, blk.m.shape[-1], second)
        if pull is not None:
            rate = scale_rate(rate, shape, pull[k].reshape(-1))
        out[k] = (shape, rate)
    return out


def _bound(st, gam, pri, bt: Batch, raw: Raw, items, users, pi_ev, n_gh, reduce=None, tau=None,
           res_prior=None, order_prior=None) -> float:
    """Eq. 31: expected log-likelihood (scaled to P) − KL of every Gaussian and Gamma factor
    (``reduce``: the likelihood term summed over the ranks of a distributed fit)."""
    Es = {k: s / r for k, (s, r) in gam.items()}
    mu, var = _total(_moments(raw, bt, Es["t"], Es["v"], Es["w"]))
    ell = _weighted(_ell(bt.y, mu, var, n_gh, tau), bt)
    ell = ell.sum() if reduce is None else reduce(ell.sum())
    return float(pi_ev * ell - kl_terms(st, gam, pri, items, users, res_prior, order_prior))


def kl_terms(st, gam, pri, items, users, res_prior=None, order_prior=None):
    """Every KL term of Eq. 31: each Gaussian factor against its prior N(0, K/s) and each Gamma q(s)
    against its prior, the item residual's and the order effect's."""
    Es = {k: s / r for k, (s, r) in gam.items()}
    Elog = {k: torch.digamma(s) - torch.log(r) for k, (s, r) in gam.items()}
    kl = (_kl_gauss(st["v"], items, Es["v"], Elog["v"]).sum()
          + _kl_gauss(st["w"], users, Es["w"], Elog["w"]).sum())
    keys = ["v", "w"]
    if st["t"] is not None:
        kl = kl + _kl_gauss(st["t"], items, Es["t"], Elog["t"]).sum()
        keys.append("t")
    for k in keys:
        kl = kl + kl_gamma(*gam[k], *pri[k]).sum()
    if st.get("r") is not None:
        kl = kl + residual.kl(st["r"], *res_prior)
    if st.get("delta") is not None:
        kl = kl + order.kl(st["delta"], order_prior)
    return kl
