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

#: ``n_inducing="auto"``: every item inducing up to this many items, then this many by k-means++
AUTO_INDUCING = 500


def resolve_inducing(setting, n: int, what: str = "n_inducing"):
    """The number of inducing inputs a setting asks for among ``n`` inputs: None (every input: exact),
    a positive int, or ``"auto"`` — every input while ``n`` ≤ :data:`AUTO_INDUCING`, else that many.

    Every input is the default because a sparse GP's conditional variance c_p / s (Eq. 19) cannot
    carry an item's own utility: with 25 inducing items on 150–300 items the crowd models lost 0.15–0.2
    nats of held-out log loss to pooled GPPL with every item (``crowdzoo compare calibration``,
    many-per-item and sparse-big). Above the cap, the O(M³) per iteration and O(C·M²) state bound the
    cost."""
    if setting is None:
        return None
    if isinstance(setting, str):
        if setting != "auto":
            raise DataError(f"{what}: expected a positive whole number, None (every one) or 'auto', "
                            f"got {setting!r}")
        return None if n <= AUTO_INDUCING else AUTO_INDUCING
    if isinstance(setting, bool) or not float(setting).is_integer() or int(setting) < 1:
        raise DataError(f"{what}: expected a positive whole number, None (every one) or 'auto', "
                        f"got {setting!r}")
    return int(setting)


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
