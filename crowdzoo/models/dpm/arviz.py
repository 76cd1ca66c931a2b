"""The DPM community model's ArviZ converter: label-invariant quantities only (community labels
switch between samples, so per-community variables would make r̂ and ESS meaningless).

posterior: ``n_communities`` and ``concentration`` per draw, and ``f`` (user, item), each user's
utilities (their community's draw; kept while draws × users × items ≤ 2²⁴), and ``lengthscale`` (dim)
when the item length-scales were inferred under a prior (shared by the communities, so label-invariant),
and ``tau`` for a fit with ties (whose labels then have three outcomes);
log-likelihood and replicated labels per label from its user's utilities, with the probit scale α.
With ``item_residual="learned"`` the root attribute ``learned_residual_variance`` (σ_r², fixed before
the sampler, so not a draw) and the group ``residual_evidence``: the pooled EP log evidence over the
σ_r² tried.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from ...diagnostics.arviz import chain_shape, finish, outcome_labels, probit_labels

_MAX_NUMBERS = 2**24


def to_arviz(post, n_draws: int = 500, seed: int = 0):
    S = post.z.shape[0]
    n = S  # the kept samples themselves, in chain order
    chains = post.n_chains
    d = post.data
    draws = post.sample(n, seed=seed)
    f = draws["f"]  # (n, U, N)
    a, b, j = (torch.as_tensor(x) for x in (d.a, d.b, d.users))
    z = (f[:, j, a] - f[:, j, b]) / post.setup.alpha
    if "tau" in draws:  # ties: the three outcomes of the ordered probit at each draw's τ (each label user's)
        tau = draws["tau"] if draws["tau"].dim() == 1 else draws["tau"][:, j]
        loglik, y_rep = outcome_labels(z, d.y, tau, "probit", seed)
    else:
        loglik, y_rep = probit_labels(z, d.y, seed)
    shape = functools.partial(chain_shape, chains=chains)
    posterior = {"n_communities": shape(draws["n_communities"]),
                 "concentration": shape(draws["concentration"])}
    attrs_f = f.numel() <= _MAX_NUMBERS
    if attrs_f:
        posterior["f"] = shape(f)
    coords = {"item": np.asarray(d.item_ids), "user": np.asarray(d.user_ids), "pair": np.arange(d.n_pairs)}
    dims = {"f": ["user", "item"], "y": ["pair"]}
    identified = "n_communities concentration f"
    if "tau" in draws:
        posterior["tau"] = shape(draws["tau"])
        if draws["tau"].dim() == 2:
            dims["tau"] = ["user"]
        identified += " tau"
    if "lengthscale" in draws:
        posterior["lengthscale"] = shape(draws["lengthscale"])
        coords["dim"] = np.arange(draws["lengthscale"].shape[1])
        dims["lengthscale"] = ["dim"]
        identified += " lengthscale"
    observed = d.y.copy() if "tau" in draws else d.y.astype(np.int64)  # y ∈ {0, ½, 1} with ties
    groups = {"posterior": posterior, "posterior_predictive": {"y": shape(y_rep)},
              "log_likelihood": {"y": shape(loglik)}, "observed_data": {"y": observed}}
    dt = finish(post, groups, coords, dims, "pair", identified=identified)
    st = post.setup
    if getattr(st, "residual_grid", None) is not None:  # item_residual="learned": σ_r² and its evidence
        import xarray as xr

        dt.attrs["learned_residual_variance"] = st.residual_variance
        dt["residual_evidence"] = xr.DataTree(xr.Dataset(
            {"log_evidence": ("residual_variance", st.residual_log_evidence.numpy())},
            coords={"residual_variance": st.residual_grid.numpy()}))
    return dt
