"""A seeded simulator of communities of taste, the DPM community model's story with a fixed partition:
users fall into ``n_communities`` communities (dealt round-robin), each community has its own GP
utility over 2-D item features, independent or sharing a common part, and a user's labels come from
their community's utility through the probit link Φ(f_a − f_b). The tests, the notebook, the
``dpm-simulation`` comparison and the DPM benchmark all draw from it."""
from __future__ import annotations

import numpy as np
import torch

from ..gp.kernels import Kernel
from .pairwise import PairwiseData
from .simulate import random_pairs

__all__ = ["simulate_communities"]


def simulate_communities(n_users: int = 60, n_items: int = 30, n_labels: int = 20, n_communities: int = 4,
                         scale: float = 2.0, lengthscale: float = 0.3, kernel: str = "se",
                         deviation: float | None = None, seed=0):
    """Draw users in communities of taste: x ~ U[0, 1]², user u in community u mod C, and ``n_labels``
    labels per user, y ~ Bernoulli(Φ(f^{c_u}_a − f^{c_u}_b)) on uniform random pairs, where
    g, h_c ~ GP(0, K) (``kernel`` with ``lengthscale`` in each dimension) and

    * ``deviation=None``: independent communities, f^c = scale · h_c;
    * ``deviation=d``: a shared part plus each community's own, f^c = scale · (g + d h_c) / √(1 + d²),
      so every f^c has variance scale² and two communities' utilities correlation 1 / (1 + d²).

    ``seed``: an int or a sequence of ints (``numpy.random.default_rng``'s seed).

    Returns ``(data, truth)``: ``data`` with user ids ``"user00"``, … and item ids ``"item00"``, …;
    ``truth`` = {"communities": (U,) int community of each user, "f": (C, N) each community's
    utilities at the items}.
    """
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, size=(n_items, 2))
    k = Kernel(kernel, torch.tensor([lengthscale, lengthscale], dtype=torch.float64))
    Xt = torch.as_tensor(X)
    K = k(Xt, Xt).numpy() + 1e-8 * np.eye(n_items)
    if deviation is None:
        F = scale * rng.multivariate_normal(np.zeros(n_items), K, size=n_communities)
    else:
        G = rng.multivariate_normal(np.zeros(n_items), K, size=n_communities + 1)
        F = scale * (G[0] + deviation * G[1:]) / np.sqrt(1.0 + deviation ** 2)
    communities = np.arange(n_users) % n_communities
    a, b = random_pairs(rng, n_items, n_users * n_labels)
    users = np.repeat(np.arange(n_users), n_labels)
    f = F[communities[users]]
    rows = np.arange(a.size)
    z = f[rows, a] - f[rows, b]
    y = (z + rng.normal(size=z.shape) > 0).astype(np.float64)
    wu, wi = len(str(n_users - 1)), len(str(n_items - 1))
    data = PairwiseData.from_arrays(a, b, y, X, users=users,
                                    user_ids=[f"user{j:0{max(wu, 2)}d}" for j in range(n_users)],
                                    item_ids=[f"item{i:0{max(wi, 2)}d}" for i in range(n_items)])
    return data, {"communities": communities, "f": F}
