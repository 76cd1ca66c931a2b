"""SCDC's and BayesSCDC's ArviZ converter: label-invariant quantities and the workers.

posterior: ``n_clusters`` (clusters with an item, per draw of every item's cluster from its cluster
probabilities), ``alpha`` and ``beta`` (draw, worker) (Beta draws for BayesSCDC; SCDC's point
estimates repeated); log-likelihood and replicated labels ``y`` per annotation (1 must-link) from
the two-coin model (Eq. 1) under the drawn clusters. Cluster labels are not identified, so no
per-cluster variable is kept; an optimisation group carries the ELBO per epoch.
"""
from __future__ import annotations

import numpy as np
import torch

from ...diagnostics.arviz import finish


def to_arviz(post, n_draws: int = 500, seed: int = 0):
    d = post.data
    draws = post.sample(n_draws, seed=seed)
    z, alpha, beta = draws["z"], draws["alpha"], draws["beta"]
    i, j, w = (torch.as_tensor(x, dtype=torch.long) for x in (d.i, d.j, d.worker))
    same = z[:, i] == z[:, j]  # (n, A)
    p1 = torch.where(same, alpha[:, w], 1.0 - beta[:, w]).clamp(1e-12, 1 - 1e-12)
    L = torch.as_tensor(d.same, dtype=torch.float64)
    loglik = L * torch.log(p1) + (1 - L) * torch.log1p(-p1)
    g = torch.Generator().manual_seed(seed + 1)
    L_rep = (torch.rand(p1.shape, generator=g, dtype=p1.dtype) < p1).to(torch.int64)
    n_clusters = torch.tensor([len(torch.unique(r)) for r in z])

    def one_chain(x):
        x = x.numpy()
        return x.reshape((1,) + x.shape)

    coords = {"item": np.asarray(d.item_ids), "worker": np.asarray(d.worker_ids)[:alpha.shape[1]],
              "annotation": np.arange(d.n_annotations)}
    dims = {"alpha": ["worker"], "beta": ["worker"], "y": ["annotation"]}
    groups = {"posterior": {"n_clusters": one_chain(n_clusters), "alpha": one_chain(alpha),
                            "beta": one_chain(beta)},
              "posterior_predictive": {"y": one_chain(L_rep)}, "log_likelihood": {"y": one_chain(loglik)},
              "observed_data": {"y": d.same.astype(np.int64)}}
    return finish(post, groups, coords, dims, "annotation", identified="n_clusters alpha beta")
