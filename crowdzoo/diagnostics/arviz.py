"""Conversion of fitted posteriors to ArviZ ``DataTree`` objects (arviz-base ``from_dict``).

Groups: ``posterior`` (f over items, s), ``posterior_predictive`` (replicated labels),
``observed_data``, ``log_likelihood`` (per pair), ``sample_stats`` (NUTS: diverging, lp) and,
for optimisation routes, ``optimisation`` (the loss or bound per iteration). Draws of an
approximate route are draws from the approximation: the root attribute ``approximate`` says so.
"""
from __future__ import annotations

import numpy as np
import torch
from arviz_base import from_dict
from torch.special import log_ndtr


def gppl_to_arviz(post, n_draws: int = 1000, seed: int = 0):
    sample_based = post.covs is None and post.s_shape is None
    n = post.weights.shape[0] if sample_based else n_draws
    chains = post.n_chains if sample_based else 1
    draws = post.sample(n, seed=seed)
    f, s = draws["f"], draws["s"]
    a = torch.as_tensor(post.data.a)
    b = torch.as_tensor(post.data.b)
    y = torch.as_tensor(post.data.y)
    z = (2 * y - 1) * (f[:, a] - f[:, b])
    loglik = log_ndtr(z)
    g = torch.Generator().manual_seed(seed + 1)
    p1 = torch.special.ndtr(f[:, a] - f[:, b])
    y_rep = (torch.rand(p1.shape, generator=g, dtype=p1.dtype) < p1).to(torch.int64)

    def shape(x):
        x = x.numpy()
        return x.reshape((chains, x.shape[0] // chains) + x.shape[1:])

    items = np.asarray(post.data.item_ids)
    coords = {"item": items, "pair": np.arange(post.data.n_pairs)}
    dims = {"f": ["item"], "y": ["pair"]}
    groups = {
        "posterior": {"f": shape(f), "s": shape(s)},
        "posterior_predictive": {"y": shape(y_rep)},
        "log_likelihood": {"y": shape(loglik)},
        "observed_data": {"y": post.data.y.astype(np.int64)},
    }
    if post.sample_stats:
        groups["sample_stats"] = {"diverging": np.asarray(post.sample_stats["diverging"]),
                                  "lp": -np.asarray(post.sample_stats["potential_energy"])}
    trace = {k: np.asarray(v) for k, v in post.trace.items() if k in ("loss", "bound")}
    attrs = {"/": {"inference": post.method, "approximate": int(post.method != "nuts"),
                   "model": post.model.name}}
    dt = from_dict(groups, coords=coords, dims=dims, attrs=attrs)
    if trace:
        import xarray as xr

        ds = xr.Dataset({k: ("iteration", v) for k, v in trace.items()})
        dt["optimisation"] = xr.DataTree(ds)
    return dt
