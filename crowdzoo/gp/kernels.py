"""Kernels: stationary kernels with per-dimension length-scales (plain broadcasting functions), and
kernel objects that add and multiply (``Kernel("se") + Kernel("matern32")``) or wrap any callable.

The built-in amplitude is 1: the function scale is carried by the inverse scale ``s`` of each model
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


def _matern32_r2(r2: torch.Tensor) -> torch.Tensor:
    """Matérn 3/2 of squared distances r² (the same 1e-30 under the root as :func:`matern32`, so that
    the gradient in ℓ of a pair of items with equal features is 0, not 0 · ∞ = NaN)."""
    sr = math.sqrt(3.0) * torch.sqrt(r2 + 1e-30)
    return (1.0 + sr) * torch.exp(-sr)


KERNELS = {
    "matern32": (matern32, _matern32_r2),
    "se": (squared_exponential, lambda r2: torch.exp(-0.5 * r2)),
}
KERNELS["squared_exponential"] = KERNELS["se"]


def identity(x1: torch.Tensor, x2: torch.Tensor, lengthscale: torch.Tensor) -> torch.Tensor:
    """k(x, x') = 1 if x = x' else 0: independent values per distinct input (the crowdGPPL
    variants without features, ``\\u`` and ``\\u\\x``, use it over row indices)."""
    return (_scaled_sqdist(x1, x2, lengthscale) < 1e-12).to(x1.dtype)


KERNELS["identity"] = (identity, lambda r2: (r2 < 1e-12).to(r2.dtype))


class KernelBase:
    """What every kernel object offers: ``k(X1, X2)`` (n, m), ``pairs(Xa, Xb)`` = k(x_a, x_b) row by
    row, ``diag(X)`` = k(x, x), and ``+`` / ``*`` to build sums and products."""

    def pairs(self, xa: torch.Tensor, xb: torch.Tensor) -> torch.Tensor:
        return self(xa[..., None, :], xb[..., None, :])[..., 0, 0]

    def diag(self, x: torch.Tensor) -> torch.Tensor:
        return self.pairs(x, x)

    def __add__(self, other):
        return Sum(self, as_kernel(other))

    def __mul__(self, other):
        return Product(self, as_kernel(other))

    def with_lengthscale(self, ell: torch.Tensor):
        """This kernel with every unset length-scale replaced by ``ell`` (the median heuristic)."""
        return self


@dataclass(frozen=True)
class Kernel(KernelBase):
    """A named stationary kernel ("matern32", "se", "identity") with per-dimension length-scales
    ℓ (D,) and amplitude ``variance`` (1 by default: the models carry the scale in s).

    ``Kernel("matern32", ell)(X1, X2)`` gives the (n, m) kernel matrix in float64;
    ``pairs(Xa, Xb)`` gives k(x_a, x_b) row by row (the diagonal of the cross matrix, without it).
    ``Kernel("se")`` with no length-scale takes the model's (the median heuristic of Eq. 26).

    ``white`` adds an independent part of that variance to each input of the set the kernel is built on
    (``k(X, X)`` and ``diag``; a cross matrix ``k(Z, X)`` between two different sets carries none):
    with every input inducing, f(x_j) = g(x_j) + ε_j, ε_j ~ N(0, white), so inputs with equal features
    keep values of their own; a new input gets g's prediction and ε's variance.
    """

    name: str
    lengthscale: torch.Tensor | None = None
    variance: float = 1.0
    white: float = 0.0

    def __post_init__(self):
        if self.name not in KERNELS:
            raise DataError(f"kernel: unknown kernel {self.name!r}; choose one of {sorted(KERNELS)} "
                            "or pass a kernel object or a callable k(X1, X2)")
        if not float(self.variance) > 0:
            raise DataError(f"kernel variance: must be positive, got {self.variance}")
        if not float(self.white) >= 0:
            raise DataError(f"kernel white: must be at least 0, got {self.white}")
        if self.lengthscale is None:
            return
        ls = torch.as_tensor(self.lengthscale, dtype=DTYPE).reshape(-1)
        if not torch.isfinite(ls).all() or (ls <= 0).any():
            raise DataError(f"lengthscale: must be positive and finite, got {ls.tolist()}")
        object.__setattr__(self, "lengthscale", ls)

    def _ell(self):
        if self.lengthscale is None:
            raise DataError(f"kernel {self.name!r}: no length-scale set (the model sets it from the data)")
        return self.lengthscale

    def __call__(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        K = self.variance * KERNELS[self.name][0](x1, x2, self._ell())
        if self.white and x1 is x2:  # the set's own matrix: each input's independent part
            K = K + self.white * torch.eye(K.shape[-1], dtype=K.dtype)
        return K

    def pairs(self, xa: torch.Tensor, xb: torch.Tensor) -> torch.Tensor:
        return self.variance * KERNELS[self.name][1](_pair_r2(xa, xb, self._ell()))

    def diag(self, x: torch.Tensor) -> torch.Tensor:
        return torch.full(x.shape[:-1], float(self.variance + self.white), dtype=x.dtype)

    def with_lengthscale(self, ell):
        if self.lengthscale is not None:
            return self
        return Kernel(self.name, torch.as_tensor(ell, dtype=DTYPE), self.variance, self.white)


@dataclass(frozen=True)
class Sum(KernelBase):
    """k₁ + k₂."""

    k1: KernelBase
    k2: KernelBase

    def __call__(self, x1, x2):
        return self.k1(x1, x2) + self.k2(x1, x2)

    def pairs(self, xa, xb):
        return self.k1.pairs(xa, xb) + self.k2.pairs(xa, xb)

    def diag(self, x):
        return self.k1.diag(x) + self.k2.diag(x)

    def with_lengthscale(self, ell):
        return Sum(self.k1.with_lengthscale(ell), self.k2.with_lengthscale(ell))


@dataclass(frozen=True)
class Product(KernelBase):
    """k₁ · k₂ (elementwise)."""

    k1: KernelBase
    k2: KernelBase

    def __call__(self, x1, x2):
        return self.k1(x1, x2) * self.k2(x1, x2)

    def pairs(self, xa, xb):
        return self.k1.pairs(xa, xb) * self.k2.pairs(xa, xb)

    def diag(self, x):
        return self.k1.diag(x) * self.k2.diag(x)

    def with_lengthscale(self, ell):
        return Product(self.k1.with_lengthscale(ell), self.k2.with_lengthscale(ell))


@dataclass(frozen=True)
class FunctionKernel(KernelBase):
    """Any callable ``k(X1, X2) -> (n, m)`` that broadcasts over leading dimensions (so that
    ``pairs`` and ``diag`` follow from it). Not stored by ``posterior.save`` (a Python function)."""

    fn: object

    def __call__(self, x1, x2):
        return torch.as_tensor(self.fn(x1, x2), dtype=DTYPE)


def as_kernel(kernel, lengthscale=None) -> KernelBase:
    """A kernel object from what a model accepts: a name ("matern32", "se"), a kernel object
    (:class:`Kernel`, sums and products of them) or a callable ``k(X1, X2)``; unset length-scales
    become ``lengthscale``."""
    if isinstance(kernel, str):
        kernel = Kernel(kernel)
    elif not isinstance(kernel, KernelBase):
        if not callable(kernel):
            raise DataError(f"kernel: expected a name, a kernel object or a callable k(X1, X2), "
                            f"got {type(kernel).__name__}")
        kernel = FunctionKernel(kernel)
    return kernel if lengthscale is None else kernel.with_lengthscale(lengthscale)


def kernel_name(kernel) -> str:
    """A short description of a model's ``kernel`` argument (for tables and reports)."""
    if isinstance(kernel, str):
        return kernel
    if isinstance(kernel, Kernel):
        return kernel.name
    if isinstance(kernel, (Sum, Product)):
        op = " + " if isinstance(kernel, Sum) else " * "
        return f"({kernel_name(kernel.k1)}{op}{kernel_name(kernel.k2)})"
    return getattr(getattr(kernel, "fn", kernel), "__name__", type(kernel).__name__)


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
    width = max(1, min(64, 2**21 // max(i.size, 1)))  # blocks of feature dimensions bound the memory
    for lo in range(0, X.shape[1], width):
        diffs = np.abs(X[i, lo:lo + width] - X[j, lo:lo + width])
        if diffs.shape[0] == 0:
            continue
        med = np.median(diffs, axis=0)
        mean = diffs.mean(axis=0)
        ell[lo:lo + width] = np.where(med > 0, med, np.where(mean > 0, mean, 1.0))
    if scaled:
        ell = ell * 20.0 * math.sqrt(X.shape[1])
    return torch.as_tensor(ell, dtype=DTYPE)


def median_distance(X, lengthscale, n_pairs: int = 20000, seed: int = 0) -> float:
    """The median of r = ‖(x − x')/ℓ‖ over ``n_pairs`` seeded random pairs of distinct rows of X (N, D)."""
    X = np.asarray(X, dtype=np.float64)
    rng = np.random.default_rng(seed)
    i = rng.integers(0, X.shape[0], n_pairs)
    j = (i + 1 + rng.integers(0, max(X.shape[0] - 1, 1), n_pairs)) % X.shape[0]
    ell = np.asarray(lengthscale, dtype=np.float64)
    return float(np.median(np.sqrt((((X[i] - X[j]) / ell) ** 2).sum(-1))))


#: the median pair distance under ℓ_MH beyond which learning starts from the rescaled heuristic: at
#: r = 4 the Matérn 3/2 derivative in log ℓ, 3r² e^{−√3 r}, is a tenth of its peak (0.54 at r = 1.15)
FLAT_R = 4.0


def learning_start(X, seed: int = 0) -> torch.Tensor:
    """Where learned ARD length-scales start. Per dimension ℓ_MH (Eq. 26) puts each coordinate's
    median difference at 1, so all D together put the median pair of items near r = √D or beyond: on
    64-D text features r ≈ 12.5, where Matérn 3/2 is 10⁻⁸, the items are independent under the prior
    and the bound's gradient in log ℓ vanishes (``benchmarks/diagnose_highd_start.py``). Where the
    median pair under ℓ_MH is beyond :data:`FLAT_R`, learning starts at ℓ_MH times that distance, so
    that the median pair is at r = 1 (Matérn 3/2: k = .48, its derivative near its peak); nearer,
    at ℓ_MH itself, whose neighbourhood the learned optimum of few dimensions is found from (on a
    2-D problem, starting at r = 1 instead left natgrad's ℓ at half of EP's type-II optimum). The
    fixed kernel (nothing learned) stays the median heuristic."""
    ell = median_heuristic(X)
    if ell.shape[0] <= 1 or np.asarray(X).shape[0] < 2:
        return ell
    r = median_distance(X, ell, seed=seed)
    return ell * r if r > FLAT_R else ell
