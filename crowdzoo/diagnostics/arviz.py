"""Conversion of fitted posteriors to ArviZ ``DataTree`` objects (arviz-base ``from_dict``).

Groups: ``posterior`` (f over items, s), ``posterior_predictive`` (replicated labels),
``observed_data``, ``constant_data`` (the two items and the user of each label, as the user's own
ids), ``log_likelihood`` (per label), ``sample_stats`` (NUTS: diverging, lp, tree_depth, energy)
and, for optimisation routes, ``optimisation`` (the loss, bound or EP's largest change per
iteration; GPPL's EP: the log evidence over its grid of s). Draws of an approximate route are
draws from the approximation: the root attribute ``approximate`` says so. Root attributes also
name the model, the route and the identified posterior variables (``identified``; W and V, W and H
of the factor models are identified only up to sign and rotation).
"""
from __future__ import annotations

import functools

import numpy as np
import torch
from arviz_base import from_dict
from torch.special import log_ndtr

from ..linalg import cholesky, gamma_draws
from ..models.crowdbt_gp import crowdbt_label_log_lik


def _chain_shape(x, chains=1):
    """(chains × draws, ...) tensor → (chain, draw, ...) array."""
    x = x.numpy()
    return x.reshape((chains, x.shape[0] // chains) + x.shape[1:])


def _probit_labels(z, y, seed):
    """Per-label log-likelihood log Φ((2y − 1) z) and replicated labels y_rep ~ Bernoulli(Φ(z)) for
    the draws of z = f_a − f_b (draws, labels)."""
    g = torch.Generator().manual_seed(seed + 1)
    y_rep = (torch.rand(z.shape, generator=g, dtype=z.dtype) < torch.special.ndtr(z)).to(torch.int64)
    return log_ndtr((2 * torch.as_tensor(y) - 1) * z), y_rep


def gppl_to_arviz(post, n_draws: int = 1000, seed: int = 0):
    sample_based = post.covs is None and post.s_shape is None
    n = post.weights.shape[0] if sample_based else n_draws
    chains = post.n_chains if sample_based else 1
    draws = post.sample(n, seed=seed)
    f, s = draws["f"], draws["s"]
    a = torch.as_tensor(post.data.a)
    b = torch.as_tensor(post.data.b)
    loglik, y_rep = _probit_labels(f[:, a] - f[:, b], post.data.y, seed)

    shape = functools.partial(_chain_shape, chains=chains)

    items = np.asarray(post.data.item_ids)
    coords = {"item": items, "pair": np.arange(post.data.n_pairs)}
    dims = {"f": ["item"], "y": ["pair"]}
    groups = {
        "posterior": {"f": shape(f), "s": shape(s)},
        "posterior_predictive": {"y": shape(y_rep)},
        "log_likelihood": {"y": shape(loglik)},
        "observed_data": {"y": post.data.y.astype(np.int64)},
    }
    return _finish(post, groups, coords, dims, "pair", identified="f s")


def crowd_to_arviz(post, n_draws: int = 500, seed: int = 0):
    """crowdGPPL: posterior t (item), V (component, item), W (component, user) and the inverse
    scales; log-likelihood and replicated labels per pair from the personal utilities. V and W
    are identified only up to sign and rotation (read diagnostics on t, F and predictions)."""
    sample_based = post.t_cov is None and post.v_cov is None
    n = post.weights.shape[0] if sample_based else n_draws
    chains = post.n_chains if sample_based else 1
    dr = post.sample(n, seed=seed)
    d = post.data
    a, b, j = (torch.as_tensor(x) for x in (d.a, d.b, d.users))
    zf = (dr["V"][:, :, a] - dr["V"][:, :, b]) * dr["W"][:, :, j]
    z = zf.sum(1) + (dr["t"][:, a] - dr["t"][:, b] if "t" in dr else 0.0)
    loglik, y_rep = _probit_labels(z, d.y, seed)

    shape = functools.partial(_chain_shape, chains=chains)

    C = post.setup.C
    coords = {"item": np.asarray(d.item_ids), "user": np.asarray(d.user_ids), "component": np.arange(C),
              "pair": np.arange(d.n_pairs)}
    dims = {"t": ["item"], "V": ["component", "item"], "W": ["component", "user"],
            "s_v": ["component"], "s_w": ["component"], "y": ["pair"]}
    posterior = {k: shape(v) for k, v in dr.items()}
    groups = {"posterior": posterior, "posterior_predictive": {"y": shape(y_rep)},
              "log_likelihood": {"y": shape(loglik)}, "observed_data": {"y": d.y.astype(np.int64)}}
    return _finish(post, groups, coords, dims, "pair", identified="t s_t" if "t" in dr else "")


def collabgp_to_arviz(post, n_draws: int = 500, seed: int = 0):
    """collabGP: posterior W (user, latent) and H (latent, pair) at the training pairs, whose ids
    are "a|b" (oriented lo < hi in the data's item order); log-likelihood and replicated labels per
    label. W and H are identified only up to sign and rotation (read diagnostics on g and
    predictions). ``optimisation`` holds EP's largest change of a mean of g per sweep."""
    sample_based = post.a_cov is None
    n = post.weights.shape[0] if sample_based else n_draws
    chains = post.n_chains if sample_based else 1
    dr = post.sample(n, seed=seed)
    st = post.setup
    g = (dr["w"][:, st.u, :] * dr["h"][:, :, st.z].transpose(1, 2)).sum(-1)  # (n, L), oriented lo < hi
    loglik = log_ndtr(st.t * g)
    gen = torch.Generator().manual_seed(seed + 1)
    t_rep = torch.where(torch.rand(g.shape, generator=gen, dtype=g.dtype) < torch.special.ndtr(g), 1.0, -1.0)
    orient = st.t * (2.0 * torch.as_tensor(post.data.y) - 1.0)  # +1 where the label's a is the pair's lo
    y_rep = (t_rep * orient > 0).to(torch.int64)  # 1 = a ≻ b, as in the data

    shape = functools.partial(_chain_shape, chains=chains)

    ids = np.asarray(post.data.item_ids)
    P = st.pairs.numpy()
    coords = {"user": np.asarray(post.data.user_ids), "latent": np.arange(st.D),
              "pair": np.array([f"{ids[i]}|{ids[j]}" for i, j in P]), "label": np.arange(st.L)}
    dims = {"W": ["user", "latent"], "H": ["latent", "pair"], "y": ["label"]}
    groups = {"posterior": {"W": shape(dr["w"]), "H": shape(dr["h"])},
              "posterior_predictive": {"y": shape(y_rep)}, "log_likelihood": {"y": shape(loglik)},
              "observed_data": {"y": post.data.y.astype(np.int64)}}
    return _finish(post, groups, coords, dims, "label", identified="")


_MAX_NUMBERS = 2**24  # per_user_to_arviz keeps f (draw, user, item) only up to this size


def per_user_to_arviz(post, n_draws: int = 500, seed: int = 0):
    """GPPL-per-user: posterior f (user, item), each user's utilities, s (user) and f_mean
    (item), the users' mean utility (the consensus this baseline predicts with); log-likelihood
    and replicated labels per label from the label's user's f. Draws of f_m,j ~ N(m_j, S_j) and
    s_j ~ q(s_j) map to the items as for GPPL (Eq. 19, the sparse conditional added per item),
    a block of users at a time; f itself is kept only while draws × users × items ≤ 2²⁴ (the root
    attribute ``f_omitted`` says when it is not)."""
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
    loglik, y_rep = _probit_labels(z, d.y, seed)
    coords = {"item": np.asarray(d.item_ids), "user": np.asarray(d.user_ids), "pair": np.arange(d.n_pairs)}
    dims = {"f": ["user", "item"], "f_mean": ["item"], "s": ["user"], "y": ["pair"]}
    posterior = {"f_mean": _chain_shape(f_sum / U), "s": _chain_shape(s)}
    if keep:
        posterior["f"] = _chain_shape(torch.cat(blocks, 1))
    groups = {"posterior": posterior, "posterior_predictive": {"y": _chain_shape(y_rep)},
              "log_likelihood": {"y": _chain_shape(loglik)},
              "observed_data": {"y": d.y.astype(np.int64)}}
    dt = _finish(post, groups, coords, dims, "pair", identified="f_mean s")
    if not keep:
        dt.attrs["f_omitted"] = f"draws × users × items = {n * U * N} > 2^24: f left out"
    return dt


def crowdbt_to_arviz(post, n_draws: int = 500, seed: int = 0):
    """crowdBT–GP: posterior g (item), draws of the consensus score from the stage-2 GP
    regression, and eta (user), the stage-1 MAP reliabilities repeated in every draw (a point
    estimate: its sd is 0, and its variable attrs say so). Log-likelihood and replicated labels per
    label use the crowdBT likelihood η σ(g_a − g_b) + (1 − η) σ(g_b − g_a) with these g and η.
    The two-stage fit is not a joint posterior, so the checks read it as an approximation."""
    d = post.data
    gen = torch.Generator().manual_seed(seed)
    B, c = post.project(torch.as_tensor(d.item_features, dtype=post.L_mm.dtype))  # (M, N), (N,)
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
    posterior = {"g": _chain_shape(gdraw)}
    if users:
        coords["user"] = np.asarray(d.user_ids)
        dims["eta"] = ["user"]
        posterior["eta"] = _chain_shape(eta.expand(n_draws, -1))
    groups = {"posterior": posterior, "posterior_predictive": {"y": _chain_shape(y_rep)},
              "log_likelihood": {"y": _chain_shape(loglik)}, "observed_data": {"y": d.y.astype(np.int64)}}
    dt = _finish(post, groups, coords, dims, "pair", identified="g")
    if users:
        dt.posterior["eta"].attrs["estimate"] = "MAP (crowdBT stage 1), repeated in every draw"
    return dt


def _finish(post, groups, coords, dims, obs_dim, identified):
    """Constant data, sample stats (NUTS), root attributes and the optimisation trace, shared by
    every model."""
    d = post.data
    ids = np.asarray(d.item_ids)
    const = {"a": ids[d.a], "b": ids[d.b]}
    if d.users is not None:
        const["user"] = np.asarray(d.user_ids)[d.users]
    groups["constant_data"] = const
    dims.update({k: [obs_dim] for k in const})
    if post.sample_stats:
        st = post.sample_stats
        groups["sample_stats"] = {"diverging": np.asarray(st["diverging"]),
                                  "lp": -np.asarray(st["potential_energy"])}
        for k in ("tree_depth", "energy"):
            if k in st:
                groups["sample_stats"][k] = np.asarray(st[k])
    attrs = {"/": {"inference": post.method, "approximate": int(post.method != "nuts"),
                   "model": post.model.name, "identified": identified,
                   "max_tree_depth": int(post.settings.get("max_tree_depth", 0) or 0)}}
    converged = post.settings.get("converged", (post.trace or {}).get("converged"))
    if converged is not None:  # optimisation routes that stop on a tolerance
        attrs["/"]["converged"] = int(bool(converged))
    dt = from_dict(groups, coords=coords, dims=dims, attrs=attrs)
    tr = post.trace or {}
    import xarray as xr

    if "bound" in tr and "bound_iteration" in tr:
        opt = xr.Dataset({"bound": ("iteration", np.asarray(tr["bound"]))},
                         coords={"iteration": np.asarray(tr["bound_iteration"])})
    elif "s_grid" in tr:
        opt = xr.Dataset({"log_evidence": ("s", np.asarray(tr["log_evidence"]))},
                         coords={"s": np.asarray(tr["s_grid"])})
    else:
        opt = xr.Dataset({k: ("iteration", np.asarray(v)) for k, v in tr.items()
                          if k in ("loss", "bound", "max_change")})
    if opt.data_vars:
        dt["optimisation"] = xr.DataTree(opt)
    return dt
