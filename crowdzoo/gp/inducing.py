"""Inducing inputs for sparse GPs.

Simpson & Gurevych (2020, §4.2, after Algorithm 1) choose the M inducing points up front as the
cluster centres of K-means with k-means++ seeding (Arthur & Vassilvitskii 2007) on the item
features. We use scikit-learn's ``KMeans(init="k-means++")`` with a fixed seed.
"""
from __future__ import annotations

import numpy as np
import torch

from ..errors import DataError

DTYPE = torch.float64


def kmeanspp_inducing(X, M: int, seed: int = 0) -> torch.Tensor:
    """M inducing inputs (M, D): k-means++-seeded K-means centres of the rows of X (N, D).

    If M ≥ the number of distinct rows, the distinct rows themselves are returned (the sparse
    model is then exact on the training items).
    """
    from sklearn.cluster import KMeans

    X = np.asarray(X, dtype=np.float64)
    if M < 1:
        raise DataError(f"n_inducing: must be at least 1, got {M}")
    uniq = np.unique(X, axis=0)
    if M >= uniq.shape[0]:
        return torch.as_tensor(uniq, dtype=DTYPE)
    km = KMeans(n_clusters=M, init="k-means++", n_init=1, random_state=seed, max_iter=100)
    km.fit(X)
    return torch.as_tensor(km.cluster_centers_, dtype=DTYPE)
