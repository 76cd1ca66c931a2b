"""Stationary kernels with per-dimension length-scales, as plain broadcasting functions.

The amplitude is 1: the function scale is carried by the inverse scale ``s`` of each model
(f ~ GP(0, k_theta / s), Simpson & Gurevych 2020, §3.1). Kernels broadcast over leading
dimensions so that sample batches need no special handling.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import DataError

DTYPE = torch.float64


def _scaled_sqdist(x1: torch.Tensor, x2: torch.Tensor, lengthscale: torch.Tensor) -> torch.Tensor:
    """Squared distance between rows of x1 (..., n, D) and x2 (..., m, D) after dividing by ℓ_d."""
    a = x1 / lengthscale
    b = x2 / lengthscale
    d2 = (a * a).sum(-1)[..., :, None] + (b * b).sum(-1)[..., None, :] - 2.0 * a @ b.transpose(-1, -2)
    return d2.clamp_min(0.0)


def matern32(x1: torch.Tensor, x2: torch.Tensor, lengthscale: torch.Tensor) -> torch.Tensor:
    """Matérn 3/2: k(r) = (1 + √3 r) exp(−√3 r), r = ‖(x1 − x2)/ℓ‖. Shape (..., n, m)."""
    r = torch.sqrt(_scaled_sqdist(x1, x2, lengthscale) + 1e-30)
    sr = math.sqrt(3.0) * r
    return (1.0 + sr) * torch.exp(-sr)


def squared_exponential(x1: torch.Tensor, x2: torch.Tensor, lengthscale: torch.Tensor) -> torch.Tensor:
    """Squared exponential: k(r) = exp(−r²/2). Shape (..., n, m)."""
    return torch.exp(-0.5 * _scaled_sqdist(x1, x2, lengthscale))


def _pair_r2(xa: torch.Tensor, xb: torch.Tensor, lengthscale: torch.Tensor) -> torch.Tensor:
    return (((xa - xb) / lengthscale) ** 2).sum(-1)


KERNELS = {
    "matern32": (matern32, lambda r2: (1 + math.sqrt(3) * r2.sqrt()) * torch.exp(-math.sqrt(3) * r2.sqrt())),
    "se": (squared_exponential, lambda r2: torch.exp(-0.5 * r2)),
}
KERNELS["squared_exponential"] = KERNELS["se"]


def identity(x1: torch.Tensor, x2: torch.Tensor, lengthscale: torch.Tensor) -> torch.Tensor:
    """k(x, x') = 1 if x = x' else 0: independent values per distinct input (the crowdGPPL
    variants without features, ``\\u`` and ``\\u\\x``, use it over row indices)."""
    return (_scaled_sqdist(x1, x2, lengthscale) < 1e-12).to(x1.dtype)


KERNELS["identity"] = (identity, lambda r2: (r2 < 1e-12).to(r2.dtype))


@dataclass(frozen=True)
class Kernel:
    """A named stationary kernel with fixed per-dimension length-scales ℓ (D,).

    ``Kernel("matern32", ell)(X1, X2)`` gives the (n, m) kernel matrix in float64;
    ``pairs(Xa, Xb)`` gives k(x_a, x_b) row by row (the diagonal of the cross matrix, without it).
    """

    name: str
    lengthscale: torch.Tensor

    def __post_init__(self):
        if self.name not in KERNELS:
            raise DataError(f"kernel: unknown kernel {self.name!r}; choose one of {sorted(KERNELS)}")
        ls = torch.as_tensor(self.lengthscale, dtype=DTYPE).reshape(-1)
        if not torch.isfinite(ls).all() or (ls <= 0).any():
            raise DataError(f"lengthscale: must be positive and finite, got {ls.tolist()}")
        object.__setattr__(self, "lengthscale", ls)

    def __call__(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return KERNELS[self.name][0](x1, x2, self.lengthscale)

    def pairs(self, xa: torch.Tensor, xb: torch.Tensor) -> torch.Tensor:
        return KERNELS[self.name][1](_pair_r2(xa, xb, self.lengthscale))

    def diag(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ones(x.shape[:-1], dtype=x.dtype)


def median_heuristic(X, scaled: bool = False, max_points: int = 2000, seed: int = 0) -> torch.Tensor:
    """Per-dimension length-scales ℓ_d = median_{i,j} |x_{i,d} − x_{j,d}| (Eq. 26).

    With ``scaled=True`` returns the variant used for high-dimensional features in §5.3,
    ℓ_d = 20 √D · ℓ_d,MH. Above ``max_points`` rows the median is taken over a seeded random
    subset (the heuristic is a median; a subset of 2000 rows estimates it closely). A dimension
    whose median distance is 0 (e.g. a mostly-constant binary feature) falls back to the mean
    absolute distance, then to 1.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.shape[0] > max_points:
        X = X[np.random.default_rng(seed).permutation(X.shape[0])[:max_points]]
    i, j = np.triu_indices(X.shape[0], k=1)
    ell = np.ones(X.shape[1])
    for lo in range(0, X.shape[1], 64):  # blocks of feature dimensions bound the memory
        diffs = np.abs(X[i, lo:lo + 64] - X[j, lo:lo + 64])
        if diffs.shape[0] == 0:
            continue
        med = np.median(diffs, axis=0)
        mean = diffs.mean(axis=0)
        ell[lo:lo + 64] = np.where(med > 0, med, np.where(mean > 0, mean, 1.0))
    if scaled:
        ell = ell * 20.0 * math.sqrt(X.shape[1])
    return torch.as_tensor(ell, dtype=DTYPE)
