"""Shared GP algebra: kernels, float64 linear algebra, inducing inputs, the one sparse conditional
(Eq. 19), probit helpers (Eq. 3, 8) and the conjugate Gamma pieces (Eq. 15)."""
from .conditional import SparseGP, identity_gp
from .kernels import Kernel, Product, Sum, as_kernel, matern32, median_heuristic, squared_exponential

__all__ = ["SparseGP", "identity_gp", "Kernel", "Sum", "Product", "as_kernel", "matern32",
           "squared_exponential", "median_heuristic"]
