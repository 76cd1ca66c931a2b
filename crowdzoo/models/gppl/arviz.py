"""GPPL's ArviZ converter: posterior f (item) and s (and, with length-scales under a prior, lengthscale
(dim); with the order effect, order: δ); per-pair log-likelihood and replicated labels."""
from __future__ import annotations

import functools

import numpy as np
import torch

from ...diagnostics.arviz import chain_shape, choice_groups, finish, outcome_labels, probit_labels


def to_arviz(post, n_draws: int = 1000, seed: int = 0):
    sample_based = post.covs is None and post.s_shape is None
    n = post.weights.shape[0] if sample_based else n_draws
    chains = post.n_chains if sample_based else 1
    draws = post.sample(n, seed=seed)
    f, s = draws["f"], draws["s"]
    if hasattr(post.data, "sets"):
        return _choices(post, f, s, chains, seed)
    a = torch.as_tensor(post.data.a)
    b = torch.as_tensor(post.data.b)
    z = f[:, a] - f[:, b]
    if "order" in draws:  # the first item's advantage δ in every label's z
        z = z + draws["order"][:, None]
    if "tau" in draws:  # ties: three outcomes per pair
        loglik, y_rep = outcome_labels(z, post.data.y, draws["tau"], "probit", seed)
    else:
        loglik, y_rep = probit_labels(z, post.data.y, seed)

    shape = functools.partial(chain_shape, chains=chains)

    items = np.asarray(post.data.item_ids)
    coords = {"item": items, "pair": np.arange(post.data.n_pairs)}
    dims = {"f": ["item"], "y": ["pair"]}
    posterior = {"f": shape(f), "s": shape(s)}
    identified = "f s"
    if "tau" in draws:
        posterior["tau"] = shape(draws["tau"])
        identified = "f s tau"
    if "s_r" in draws:  # the item residual's scale (f includes the residual)
        posterior["s_r"] = shape(draws["s_r"])
        identified += " s_r"
    if "order" in draws:  # δ, the advantage of the item listed first
        posterior["order"] = shape(draws["order"])
        identified += " order"
    if "lengthscale" in draws:  # inferred under a prior: one ℓ per draw, checked like any variable
        posterior["lengthscale"] = shape(draws["lengthscale"])
        coords["dim"] = np.arange(draws["lengthscale"].shape[1])
        dims["lengthscale"] = ["dim"]
        identified += " lengthscale"
    groups = {
        "posterior": posterior,
        "posterior_predictive": {"y": shape(y_rep)},
        "log_likelihood": {"y": shape(loglik)},
        "observed_data": {"y": post.data.y.copy() if "tau" in draws else post.data.y.astype(np.int64)},
    }
    return finish(post, groups, coords, dims, "pair", identified=identified)


def _choices(post, f, s, chains, seed):
    """Choices: one log-likelihood per row (its best, and its worst given the best), replicated slots.
    ``f`` holds draws of the items' utilities themselves (the sparse conditional added per item), so
    the likelihood is the probit choice at points."""
    shape = functools.partial(chain_shape, chains=chains)
    loglik, rep, obs = choice_groups(f, post.data, "probit", seed)
    groups = {"posterior": {"f": shape(f), "s": shape(s)},
              "posterior_predictive": {k: shape(v) for k, v in rep.items()},
              "log_likelihood": {"choice": shape(loglik)}, "observed_data": obs}
    coords = {"item": np.asarray(post.data.item_ids), "row": np.arange(post.data.n_rows)}
    dims = {"f": ["item"], "choice": ["row"], **{k: ["row"] for k in obs}}
    return finish(post, groups, coords, dims, "row", identified="f s")
