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

#: ``"auto"`` with many labels: labels × Gaussian factors × M² of one pass over the labels at most
#: this (M = 200 for crowdGPPL's 21 factors at 10⁶ labels). A natural-gradient step costs
#: O(P_i M²) a factor and the loop makes at least one pass, so a pass costs about
#: P (C + 1) M² multiply-adds four times over; docs/benchmarks.md ("A large crowd through the command
#: line") times it.
PASS_BUDGET = 8.4e11
#: ``"auto"`` never goes below this many inducing inputs for the sake of speed
MIN_AUTO_INDUCING = 100


def resolve_inducing(setting, n: int, what: str = "n_inducing", work: float | None = None):
    """The number of inducing inputs a setting asks for among ``n`` inputs: None (every input: exact),
    a positive int, or ``"auto"`` — every input while ``n`` ≤ :data:`AUTO_INDUCING`, else that many;
    ``work`` (labels × Gaussian factors over these inputs, for a model that knows them) lowers
    ``"auto"`` to √(:data:`PASS_BUDGET` / work), not below :data:`MIN_AUTO_INDUCING`, so that one pass
    over many labels stays minutes on a laptop (:func:`auto_inducing`).

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
        return auto_inducing(n, work)
    if isinstance(setting, bool) or not float(setting).is_integer() or int(setting) < 1:
        raise DataError(f"{what}: expected a positive whole number, None (every one) or 'auto', "
                        f"got {setting!r}")
    return int(setting)


def auto_inducing(n: int, work: float | None = None):
    """``n_inducing="auto"`` among ``n`` inputs: None (every input) or a number of inducing inputs —
    at most :data:`AUTO_INDUCING`, and with ``work`` (labels × factors) at most
    √(:data:`PASS_BUDGET` / work) but at least :data:`MIN_AUTO_INDUCING`."""
    M = AUTO_INDUCING
    if work is not None and work > 0:
        M = min(M, max(MIN_AUTO_INDUCING, int((PASS_BUDGET / work) ** 0.5)))
    return None if n <= M else M


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
