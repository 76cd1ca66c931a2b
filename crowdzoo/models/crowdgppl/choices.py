"""crowdGPPL on choices among k items (a :class:`~crowdzoo.data.ChoiceData` with a user per row).

Row r by user j offers the items J_r; each member i has user j's utility (Eq. 5)

    f_i,j = t_i (+ r_i) + Σ_c v_c,i w_c,j

and the best (and, for best–worst rows, the worst among the rest) follows Thurstone's multinomial
probit of :mod:`crowdzoo.gp.choice` on these utilities, as GPPL's choice model does. Given the inducing
values each member's f_i,j has the conditional mean of the projected values and the conditional
variance of Eq. 25 taken per item,

    σ²_i,j = c_i / s_t + Σ_c [c_i / s_v,c (w̄²_c,j + d_j / s_w,c) + v̄²_c,i d_j / s_w,c],

which widens that member's noise (ε_i ~ N(0, ½ + σ²_i,j)); the members' conditional covariances (a
shared user's d_j, the items' cross-covariances) are left out, as in GPPL's choices. With every item
inducing and independent users (c = d = 0) a row of two items is Φ(f_a,j − f_b,j), the pairwise
model's likelihood exactly.
"""
from __future__ import annotations

import numpy as np
import pyro
import torch

from ...data.tensors import choice_tensors
from ...errors import DataError
from ...gp.choice import observe_choices
from ...gp.linalg import DTYPE
from ..gppl.model import residual
from .setup import global_sites


def choice_program(model, setup, data, subsample_size=None, learn_kernel: bool = False):
    """The Pyro model and its arguments for choices (what crowdGPPL's ``program`` returns for a
    ChoiceData): the kernels stay fixed."""
    if learn_kernel or model.lengthscale_prior is not None or model.user_lengthscale_prior is not None:
        raise DataError("lengthscale_prior: choices are fitted with fixed length-scales (the median "
                        "heuristic or lengthscale=); drop lengthscale_prior, user_lengthscale_prior and "
                        "{learn_kernel}",
                        arg="lengthscale_prior", settings=("learn_kernel",))
    if data.users is None:
        raise DataError("users: crowdGPPL needs a user per choice (ChoiceData(..., users=...)); for one "
                        "user's choices fit gppl", arg="users")
    items, mask, best, worst = choice_tensors(data)
    return crowdgppl_choice_model, (setup, items, mask, best, worst, torch.from_numpy(data.users).long(),
                                    subsample_size)


def crowdgppl_choice_model(setup, items, mask, best, worst, j, subsample_size=None):
    """The Pyro model of crowdGPPL on choices (module docstring): ``items`` (R, k_max) item positions,
    ``mask`` the slots that hold one, ``best`` (R,) and ``worst`` (R,; −1 none) slots or None, ``j``
    (R,) each row's user. The global sites are :func:`~crowdzoo.models.crowdgppl.model.crowdgppl_model`'s."""
    u_t, s_t, u_v, s_v, u_w, s_w = global_sites(setup)
    r = residual(setup)
    B = setup.items.B  # (M, N): t = Bᵀ u_t / √s_t at the items
    c = None if setup.items.exact else setup.items.conditional_variance()
    v = (B.T @ u_v.T) / s_v.sqrt()  # (N, C)
    t = None if u_t is None else (B.T @ u_t) / s_t.sqrt()
    if r is not None:
        t = t + r
    with pyro.plate("choices", items.shape[0], subsample_size=subsample_size, dim=-1) as idx:
        rows, users = items[idx], j[idx]
        e, d = setup.user_terms(users)
        w = (u_w[:, users].T if e is None else e @ u_w.T) / s_w.sqrt()  # (R, C)
        f = (v[rows] * w[:, None, :]).sum(-1)  # (R, K)
        var_w = d[:, None] / s_w  # (R, C)
        var = (v[rows] ** 2 * var_w[:, None, :]).sum(-1)
        if c is not None:
            var = var + c[rows] * ((w * w + var_w) / s_v).sum(-1)[:, None]
        if t is not None:
            f = f + t[rows]
            if c is not None:
                var = var + c[rows] / s_t
        observe_choices(f, mask[idx], None if best is None else best[idx],
                        None if worst is None else worst[idx], "probit", var)


def set_moments(post, items, users):
    """Each component's mean and variance (G, R, k_max) of the row's user's utilities of the set members
    ``items`` (R, k_max) at the training items (:meth:`~crowdzoo.core.posterior.Posterior.predict_choice`):
    Eq. 25's moments per member, q's variances included (those of a Gaussian route), the members'
    correlations left out."""
    if users is None:
        raise DataError("users: crowdGPPL's choices are personal: pass each row's user (users=...)",
                        arg="users")
    users = np.asarray(users).reshape(-1)
    if users.shape[0] != items.shape[0]:
        raise DataError(f"users: one user per set, got {users.shape[0]} for {items.shape[0]} sets",
                        arg="users")
    j = post._positions("users", users, True, post.setup.n_users, post.data.user_ids)
    G, (R, K) = post.weights.shape[0], items.shape
    mean, var = torch.empty(G, R, K, dtype=DTYPE), torch.empty(G, R, K, dtype=DTYPE)
    for gs in post._draw_chunks(post.data.n_items * (post.setup.M + post.setup.C) + R * K * post.setup.C):
        A, c = post._item_rows(None, gs)
        t, v, vt, vv = post._item_moments(A, gs)  # (g, N), (g, N, C), (N,), (N, C)
        w, ww = post._user_moments(*post._user_rows(None, gs, j), j, gs)  # (g, R, C)
        var_v = vv + c[..., None] / post.s_v[gs][:, None, :]  # (g, N, C)
        v_i, var_vi = v[:, items], var_v[:, items]  # (g, R, K, C)
        mean[gs] = torch.einsum("grkc,grc->grk", v_i, w)
        var[gs] = (torch.einsum("grkc,grc->grk", var_vi, w * w + ww)
                   + torch.einsum("grkc,grc->grk", v_i * v_i, ww))
        if t is not None:
            mean[gs] += t[:, items]
            var[gs] += (vt + c / post.s_t[gs][:, None])[:, items]
    if post.r_means is not None:  # the item residual, shared by every user
        zero = torch.zeros(G, post.data.n_items, dtype=DTYPE)
        r_mean, r_var = post._residual_items(zero, zero, None)
        mean, var = mean + r_mean[:, items], var + r_var[:, items]
    return mean, var


def to_arviz_choices(post, n_draws: int, seed: int):
    """crowdGPPL's ArviZ groups on choices: posterior t (with the residual), V, W and the scales as for
    pairs; per row the log-likelihood of its best (and worst) under its user's utilities at each draw,
    and replicated best (and worst) slots."""
    import functools

    from ...diagnostics.arviz import chain_shape, finish
    from ...gp.choice import row_log_lik, sample_choices

    sample_based = post.t_cov is None and post.v_cov is None
    n = post.weights.shape[0] if sample_based else n_draws
    shape = functools.partial(chain_shape, chains=post.n_chains if sample_based else 1)
    dr = post.sample(n, seed=seed)
    d = post.data
    items, mask = torch.as_tensor(d.sets).clamp_min(0), torch.as_tensor(d.sets >= 0)
    j = torch.as_tensor(d.users)
    f = (dr["V"][:, :, items] * dr["W"][:, :, j][..., None]).sum(1)  # (n, R, K)
    if "t" in dr:
        f = f + dr["t"][:, items]
    best, worst = torch.as_tensor(d.best), None if d.worst is None else torch.as_tensor(d.worst)
    loglik = row_log_lik(f, mask, best, worst, "probit")
    b_rep, w_rep = sample_choices(f, mask, "probit", torch.Generator().manual_seed(seed + 1), None,
                                  worst is not None)
    rep, obs = {"best": b_rep}, {"best": d.best.copy()}
    if worst is not None:
        rep["worst"], obs["worst"] = w_rep, d.worst.copy()
    coords = {"item": np.asarray(d.item_ids), "user": np.asarray(d.user_ids),
              "component": np.arange(post.setup.C), "row": np.arange(d.n_rows)}
    dims = {"t": ["item"], "V": ["component", "item"], "W": ["component", "user"], "s_v": ["component"],
            "s_w": ["component"], "choice": ["row"], **{k: ["row"] for k in obs}}
    identified = " ".join((["t", "s_t"] if "t" in dr else []) + [k for k in ("s_r",) if k in dr])
    groups = {"posterior": {k: shape(v) for k, v in dr.items()},
              "posterior_predictive": {k: shape(v) for k, v in rep.items()},
              "log_likelihood": {"choice": shape(loglik)}, "observed_data": obs}
    return finish(post, groups, coords, dims, "row", identified=identified)
