"""crowdGPPL's ArviZ converter."""
from __future__ import annotations

import functools

import numpy as np
import torch

from ...diagnostics.arviz import chain_shape, finish, outcome_labels, probit_labels


def to_arviz(post, n_draws: int = 500, seed: int = 0):
    """crowdGPPL: posterior t (item; with the item residual, t + r), V (component, item), W (component,
    user) and the inverse scales, and ``lengthscale`` (dim) / ``user_lengthscale`` (user_dim) when those
    were inferred under a prior; log-likelihood and replicated labels per pair from the personal
    utilities (with the order effect, ``order``: δ, in every label's z). V and W are identified only up
    to sign and rotation (read diagnostics on t, the length-scales, F and predictions)."""
    if hasattr(post.data, "sets"):  # choices: a log-likelihood per row
        from .choices import to_arviz_choices
        return to_arviz_choices(post, n_draws, seed)
    sample_based = post.t_cov is None and post.v_cov is None
    n = post.weights.shape[0] if sample_based else n_draws
    chains = post.n_chains if sample_based else 1
    dr = post.sample(n, seed=seed)
    d = post.data
    a, b, j = (torch.as_tensor(x) for x in (d.a, d.b, d.users))
    zf = (dr["V"][:, :, a] - dr["V"][:, :, b]) * dr["W"][:, :, j]
    z = zf.sum(1) + (dr["t"][:, a] - dr["t"][:, b] if "t" in dr else 0.0)
    if "order" in dr:  # the first item's advantage δ
        z = z + dr["order"][:, None]
    if "tau" in dr:  # ties: three outcomes per pair
        tau = dr["tau"][:, j] if dr["tau"].dim() == 2 else dr["tau"]  # a τ per user: each label's user's
        loglik, y_rep = outcome_labels(z, d.y, tau, "probit", seed)
    else:
        loglik, y_rep = probit_labels(z, d.y, seed)

    shape = functools.partial(chain_shape, chains=chains)

    C = post.setup.C
    coords = {"item": np.asarray(d.item_ids), "user": np.asarray(d.user_ids), "component": np.arange(C),
              "pair": np.arange(d.n_pairs)}
    dims = {"t": ["item"], "V": ["component", "item"], "W": ["component", "user"],
            "s_v": ["component"], "s_w": ["component"], "y": ["pair"]}
    posterior = {k: shape(v) for k, v in dr.items()}
    identified = (["t", "s_t"] if "t" in dr else []) + [k for k in ("tau", "s_r", "order") if k in dr]
    for name, dim in (("lengthscale", "dim"), ("user_lengthscale", "user_dim")):
        if name in dr:  # one ℓ per draw, identified (unlike V and W): checked like t
            coords[dim] = np.arange(dr[name].shape[1])
            dims[name] = [dim]
            identified.append(name)
    groups = {"posterior": posterior, "posterior_predictive": {"y": shape(y_rep)},
              "log_likelihood": {"y": shape(loglik)},
              "observed_data": {"y": d.y.copy() if "tau" in dr else d.y.astype(np.int64)}}
    return finish(post, groups, coords, dims, "pair", identified=" ".join(identified))
