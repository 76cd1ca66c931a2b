"""Bradley–Terry's ArviZ converter: posterior f (item), and order (δ) with the order effect; per-pair
log-likelihood and replicated labels."""
from __future__ import annotations

import numpy as np
import torch

from ...diagnostics.arviz import chain_shape, choice_groups, finish, outcome_labels
from .model import logits


def to_arviz(post, n_draws: int = 500, seed: int = 0):
    n = post.weights.shape[0] if post.method == "nuts" else n_draws
    chains = post.n_chains if post.method == "nuts" else 1
    draws = post.sample(n, seed=seed)
    f = draws["f"]
    d = post.data
    posterior = {"f": chain_shape(f, chains)}
    if hasattr(d, "sets"):  # choices: one log-likelihood per row (its best, and worst given the best)
        loglik, rep, obs = choice_groups(f, d, post.setup.link, seed)
        groups = {"posterior": posterior,
                  "posterior_predictive": {k: chain_shape(v, chains) for k, v in rep.items()},
                  "log_likelihood": {"choice": chain_shape(loglik, chains)}, "observed_data": obs}
        coords = {"item": np.asarray(d.item_ids), "row": np.arange(d.n_rows)}
        dims = {"f": ["item"], "choice": ["row"], **{k: ["row"] for k in obs}}
        return finish(post, groups, coords, dims, "row", identified="f")
    a, b = torch.as_tensor(d.a), torch.as_tensor(d.b)
    y = torch.as_tensor(d.y)
    z = f[:, a] - f[:, b]
    if "order" in draws:  # the first item's advantage δ in every label's z
        z = z + draws["order"][:, None]
        posterior["order"] = chain_shape(draws["order"], chains)
    if "tau" in draws:  # ties: three outcomes per pair
        tau = draws["tau"]
        loglik, y_rep = outcome_labels(z, y, tau, post.setup.link, seed)
        posterior["tau"] = chain_shape(tau, chains)
        observed = d.y.copy()
    else:
        lg = logits(post.setup, z)
        loglik = -torch.nn.functional.binary_cross_entropy_with_logits(lg, y.expand_as(lg), reduction="none")
        g = torch.Generator().manual_seed(seed + 1)
        y_rep = (torch.rand(lg.shape, generator=g, dtype=lg.dtype) < torch.sigmoid(lg)).to(torch.int64)
        observed = d.y.astype(np.int64)
    coords = {"item": np.asarray(d.item_ids), "pair": np.arange(d.n_pairs)}
    dims = {"f": ["item"], "y": ["pair"]}
    groups = {"posterior": posterior,
              "posterior_predictive": {"y": chain_shape(y_rep, chains)},
              "log_likelihood": {"y": chain_shape(loglik, chains)},
              "observed_data": {"y": observed}}
    return finish(post, groups, coords, dims, "pair", identified=" ".join(posterior))
