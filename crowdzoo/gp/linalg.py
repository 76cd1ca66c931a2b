"""Float64 GP algebra: Cholesky with escalating jitter, triangular solves.

Everything here works on the last two dimensions and broadcasts over leading ones.
"""
from __future__ import annotations

import torch

from ..errors import NumericalError

DTYPE = torch.float64


def cholesky(K: torch.Tensor, jitter: float = 1e-8, max_tries: int = 6, what: str = "K") -> torch.Tensor:
    """Lower Cholesky factor of a symmetric PSD matrix ``K`` (..., n, n).

    Adds ``jitter * mean(diag K)`` to the diagonal, growing it tenfold per failure, and raises
    :class:`NumericalError` naming ``what`` if the matrix stays indefinite.
    """
    if not torch.isfinite(K).all():
        raise NumericalError(
            f"{what} contains NaN or inf; check the features and kernel length-scales "
            "(a zero length-scale or non-finite feature makes the kernel undefined)."
        )
    scale = K.diagonal(dim1=-2, dim2=-1).abs().mean().clamp_min(1e-300)
    eye = torch.eye(K.shape[-1], dtype=K.dtype, device=K.device)
    L, info = torch.linalg.cholesky_ex(K)
    eps = jitter
    for _ in range(max_tries):
        if not info.any():
            return L
        L, info = torch.linalg.cholesky_ex(K + eps * scale * eye)
        eps *= 10.0
    if not info.any():
        return L
    raise NumericalError(
        f"{what} ({K.shape[-1]}x{K.shape[-1]}) is not positive definite even with jitter "
        f"{eps / 10:.1e} x mean diagonal. Try: fewer or better-spread inducing points "
        "(duplicated feature rows make the kernel singular), a shorter length-scale, or a larger "
        "`jitter` argument."
    )


def solve_lower(L: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """L^{-1} B for lower-triangular L."""
    return torch.linalg.solve_triangular(L, B, upper=False)


def cho_solve(L: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """(L L^T)^{-1} B."""
    return torch.cholesky_solve(B, L)


def logdet_from_chol(L: torch.Tensor) -> torch.Tensor:
    """log|L L^T|."""
    return 2.0 * L.diagonal(dim1=-2, dim2=-1).log().sum(-1)


def sym(A: torch.Tensor) -> torch.Tensor:
    """Symmetric part, to undo round-off asymmetry."""
    return 0.5 * (A + A.transpose(-1, -2))


def gamma_draws(shape, rate, n: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` draws of Gamma(shape, rate) (broadcast), reproducible from ``generator`` (torch's
    Gamma sampler takes no generator: a seed drawn from it seeds a forked global RNG, which is left
    as it was)."""
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.distributions.Gamma(torch.as_tensor(shape, dtype=DTYPE),
                                         torch.as_tensor(rate, dtype=DTYPE)).sample((n,))
