"""Seeded simulators of the generative models (they return the true utilities too)."""
from __future__ import annotations

import numpy as np
import torch
from torch.special import ndtr

from ..linalg import cholesky
from ..models.kernels import Kernel, median_heuristic
from .pairwise import PairwiseData


def random_pairs(rng: np.random.Generator, n_items: int, n_pairs: int):
    """n_pairs pairs (a, b) with a ≠ b, drawn uniformly."""
    a = rng.integers(0, n_items, size=n_pairs)
    b = (a + rng.integers(1, n_items, size=n_pairs)) % n_items
    return a, b


def simulate_gppl(n_items: int = 30, n_pairs: int = 300, n_features: int = 2, s: float = 1.0,
                  kernel: str = "matern32", lengthscale=None, seed: int = 0):
    """Draw from GPPL (Eq. 4): x ~ U[0, 10]^D, f ~ N(0, K/s), y_p ~ Bernoulli(Φ(f_a − f_b)).

    Returns ``(data, f_true)`` with f_true (N,) float64 numpy.
    """
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 10.0, size=(n_items, n_features))
    ell = median_heuristic(X) if lengthscale is None else lengthscale
    k = Kernel(kernel, ell)
    Xt = torch.as_tensor(X)
    L = cholesky(k(Xt, Xt), what="simulation kernel")
    eps = torch.as_tensor(rng.standard_normal(n_items))
    f = (L @ eps) / np.sqrt(s)
    a, b = random_pairs(rng, n_items, n_pairs)
    p = ndtr(f[a] - f[b]).numpy()
    y = (rng.uniform(size=n_pairs) < p).astype(np.float64)
    return PairwiseData.from_arrays(a, b, y, X), f.numpy()
