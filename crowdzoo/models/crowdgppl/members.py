"""The algebra that crowdGPPL's natural-gradient routes and its posterior share: each side's fixed GP
rows (:class:`Side`, :class:`Sides`), and a choice row's members under q — their rows (:class:`Rows`),
each block's share (:class:`Members`) and their joint Gaussian (:func:`moments`; Simpson & Gurevych 2020,
Eq. 5 and 25 with the members' covariances, written out in
:mod:`crowdzoo.models.crowdgppl.natgrad_choices`) — from which :func:`predict_choice` gives a natgrad
posterior's choice probabilities. It imports neither route nor posterior, so that both can use it."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ...errors import DataError
from ...gp import natural, residual
from ...gp.choice import gaussian_choice_probs, normal_points
from ...gp.linalg import DTYPE, cho_solve, logdet_from_chol


class Side(NamedTuple):
    """Fixed GP algebra of one side: K⁻¹ (M, M), log|K|, rows A (n, M) = K_nm K⁻¹ — or, ``whitened``,
    the same for u = L⁻¹ f: K = I and A = B ᵀ = (L⁻¹ K_mn)ᵀ."""

    K_inv: torch.Tensor
    logdet: torch.Tensor
    A: torch.Tensor | None
    whitened: bool = False


def side(setup, whitened: bool = False) -> Side:
    eye = torch.eye(setup.M, dtype=DTYPE)
    if whitened:
        return Side(eye, torch.zeros((), dtype=DTYPE), setup.B.T, True)
    A = torch.linalg.solve_triangular(setup.L_mm.T, setup.B, upper=True).T
    return Side(cho_solve(setup.L_mm, eye), logdet_from_chol(setup.L_mm), A)


class Sides(NamedTuple):
    """The crowd's setup at one θ and its item and user :class:`Side` (None: independent users)."""

    setup: object
    items: Side
    users: Side | None


def sides(setup, whitened: bool) -> Sides:
    users = None if setup.users is None else side(setup.users, whitened)
    return Sides(setup, side(setup.items, whitened), users)




def rowquad(A, S, max_elements: int = 2**22):
    """Row-wise A S_c Aᵀ for A (P, M), S (C, M, M) → (P, C): all components at once while the
    (C, P, M) product is small, else one component at a time (peak memory O(P·M), not O(C·P·M))."""
    if S.shape[0] * A.numel() <= max_elements:
        return ((A @ S) * A).sum(-1).T
    return torch.stack([((A @ S_c) * A).sum(-1) for S_c in S], dim=1)




class Rows(NamedTuple):
    """A batch of rows: the members' item rows A_J (R, K, M) (zero at padding) and conditional
    variances c_J (R, K), the users' rows Aw (R, M_u) (None: independent users) and conditional
    variances d (R,), with the rows' own fields."""

    items: torch.Tensor
    mask: torch.Tensor
    best: torch.Tensor
    worst: torch.Tensor | None
    j: torch.Tensor
    A_J: torch.Tensor
    c_J: torch.Tensor
    Aw: torch.Tensor | None
    d: torch.Tensor
    two: torch.Tensor


def rows_of(sides: Sides, c, items, mask, best, worst, j) -> Rows:
    setup, item_side, user_side = sides
    A_J = item_side.A[items] * mask[..., None]
    if user_side is None:
        Aw, d = None, torch.zeros(j.shape[0], dtype=DTYPE)
    else:
        Aw, d = user_side.A[j], setup.user_terms(j)[1]
    return Rows(items, mask, best, worst, j, A_J, c[items] * mask, Aw, d, mask.sum(-1) == 2)




class Members(NamedTuple):
    """Each block's share of the rows' members under q: t's mean o_t (R, K) and covariance V_t
    (R, K, K) (None without a consensus), each component's o_v (R, K, C) and V_v (R, C, K, K), the
    users' ŵ and ω (R, C) (q's variance only), the residual's mean and variance (R, K) (None: none)."""

    o_t: torch.Tensor | None
    V_t: torch.Tensor | None
    o_v: torch.Tensor
    V_v: torch.Tensor
    w: torch.Tensor
    w_q: torch.Tensor
    r_m: torch.Tensor | None
    r_S: torch.Tensor | None


def item_part(A_J, m, S):
    return A_J @ m, A_J @ S @ A_J.mT


def user_part(blk, bt: Rows):
    """(ŵ, ω) (R, C) of q(w) at the rows' users."""
    if bt.Aw is None:
        return blk.m[:, bt.j].T, blk.S[:, bt.j].T
    return bt.Aw @ blk.m.T, rowquad(bt.Aw, blk.S)


def members(st: dict, bt: Rows) -> Members:
    """The blocks' moments at the rows (``st``: blocks with ``m`` and ``S``, as the fit's state holds
    them or a posterior's q)."""
    o_t = V_t = r_m = r_S = None
    if st["t"] is not None:
        o_t, V_t = item_part(bt.A_J, st["t"].m, st["t"].S)
    v = st["v"]
    o_v = torch.einsum("rkm,cm->rkc", bt.A_J, v.m)
    V_v = torch.einsum("rkm,cmn,rln->rckl", bt.A_J, v.S, bt.A_J)
    w, w_q = user_part(st["w"], bt)
    if st.get("r") is not None:
        r_m, r_S = st["r"].q.m[bt.items] * bt.mask, st["r"].q.S[bt.items] * bt.mask
    return Members(o_t, V_t, o_v, V_v, w, w_q, r_m, r_S)


def moments(mem: Members, bt: Rows, Es: dict, conditional: bool):
    """μ_r (R, K), Σ_r (R, K, K) and each member's extra noise variance σ² (R, K) (None where no side is
    sparse) of :mod:`crowdzoo.models.crowdgppl.natgrad_choices`' docstring."""
    e = mem.w * mem.w + mem.w_q  # E[w²] under q (R, C)
    mu = torch.einsum("rkc,rc->rk", mem.o_v, mem.w)
    cov = (torch.einsum("rckl,rc->rkl", mem.V_v, e)
           + torch.einsum("rkc,rc,rlc->rkl", mem.o_v, mem.w_q, mem.o_v))
    if mem.o_t is not None:
        mu, cov = mu + mem.o_t, cov + mem.V_t
    if mem.r_m is not None:
        mu, cov = mu + mem.r_m, cov + torch.diag_embed(mem.r_S)
    if not conditional:
        return mu, cov, None
    dw = bt.d[:, None] / Es["w"]  # (R, C)
    Ev2 = mem.o_v * mem.o_v + torch.diagonal(mem.V_v, dim1=-2, dim2=-1).transpose(1, 2)  # (R, K, C)
    var = bt.c_J * ((e + dw) / Es["v"]).sum(-1)[:, None] + (Ev2 * dw[:, None, :]).sum(-1)
    if mem.o_t is not None:
        var = var + bt.c_J / Es["t"]
    return mu, cov, var * bt.mask




def predict_choice(post, sets, users, worst: bool = False) -> np.ndarray:
    """P(each member is chosen as best) (R, k_max) under a natgrad posterior's q: the members' joint
    Gaussian of the module docstring at each set's user, integrated as GPPL's Gaussian posteriors do
    (:func:`~crowdzoo.gp.choice.gaussian_choice_probs`: sets of two in closed form, larger ones by 256
    antithetic pairs of points), the conditional variances as each member's noise."""
    from ...core.ids import choice_positions

    if users is None:
        raise DataError("users: crowdGPPL's choices are personal: pass each row's user (users=...)",
                        arg="users")
    items, mask = choice_positions(sets, post.data.item_ids)
    users = np.asarray(users).reshape(-1)
    if users.shape[0] != items.shape[0]:
        raise DataError(f"users: one user per set, got {users.shape[0]} for {items.shape[0]} sets",
                        arg="users")
    j = post._positions("users", users, True, post.setup.n_users, post.data.user_ids)
    j = torch.as_tensor(j).long()
    setup = post.setup
    sd = sides(setup, False)
    c = torch.zeros(setup.N, dtype=DTYPE) if setup.items.exact else setup.items.conditional_variance()
    bt = rows_of(sd, c, items, mask, torch.zeros(items.shape[0], dtype=torch.long), None, j)

    def block(m, S):
        return None if m is None else natural.Gaussian(None, None, m, S)

    st = {"t": block(None if post.t_m is None else post.t_m[0], post.t_cov),
          "v": block(post.v_m[0], post.v_cov), "w": block(post.w_m[0], post.w_cov),
          "r": None if post.r_means is None else residual.Residual(
              natural.Gaussian(None, None, post.r_means[0], post.r_vars[0]), None, None)}
    Es = {"t": None if post.s_t is None else post.s_t[0], "v": post.s_v[0], "w": post.s_w[0]}
    conditional = not setup.items.exact or (setup.users is not None and not setup.users.exact)
    mu, cov, var = moments(members(st, bt), bt, Es, conditional)
    var = torch.zeros_like(mu) if var is None else var
    p = gaussian_choice_probs(-mu if worst else mu, cov, var, mask, normal_points(mask.shape[1], 256))
    return np.where(mask.numpy(), p.numpy(), 0.0)
