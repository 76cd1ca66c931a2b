"""Kernels, length-scale heuristics, inducing points and the jittered Cholesky."""
import math

import numpy as np
import pytest
import torch

import crowdzoo as cz
from crowdzoo.gp.inducing import kmeanspp_inducing
from crowdzoo.gp.kernels import Kernel, median_heuristic
from crowdzoo.gp.linalg import cholesky

rng = np.random.default_rng(0)
X = torch.tensor(rng.uniform(0, 5, size=(25, 3)))


@pytest.mark.parametrize("name", ["matern32", "se"])
def test_kernel_matrix_is_a_valid_covariance(name):
    k = Kernel(name, [1.0, 2.0, 0.5])
    K = k(X, X)
    assert K.dtype == torch.float64
    torch.testing.assert_close(K, K.T)
    torch.testing.assert_close(K.diagonal(), torch.ones(25, dtype=torch.float64))
    assert torch.linalg.eigvalsh(K).min() > -1e-10
    torch.testing.assert_close(k.pairs(X[:10], X[10:20]), k(X[:10], X[10:20]).diagonal())


def test_matern32_closed_form_and_per_dimension_scales():
    ell = np.array([1.0, 2.0, 0.5])
    x1, x2 = X[0].numpy(), X[1].numpy()
    r = np.sqrt((((x1 - x2) / ell) ** 2).sum())
    expected = (1 + math.sqrt(3) * r) * math.exp(-math.sqrt(3) * r)
    assert abs(float(Kernel("matern32", ell)(X[:1], X[1:2])) - expected) < 1e-12
    X2 = X.clone()
    X2[:, 1] *= 7.0
    torch.testing.assert_close(Kernel("matern32", [1.0, 14.0, 0.5])(X2, X2),
                               Kernel("matern32", [1.0, 2.0, 0.5])(X, X))


def test_median_heuristic_eq26():
    Xn = X.numpy()
    i, j = np.triu_indices(25, 1)
    expected = np.array([np.median(np.abs(Xn[i, d] - Xn[j, d])) for d in range(3)])
    np.testing.assert_allclose(median_heuristic(Xn).numpy(), expected)
    np.testing.assert_allclose(median_heuristic(Xn, scaled=True).numpy(), 20 * math.sqrt(3) * expected)


def test_kmeanspp_inducing():
    Z = kmeanspp_inducing(X.numpy(), 6, seed=1)
    assert Z.shape == (6, 3)
    assert (Z.min(0).values >= X.min(0).values - 1e-12).all()
    assert (Z.max(0).values <= X.max(0).values + 1e-12).all()
    torch.testing.assert_close(Z, kmeanspp_inducing(X.numpy(), 6, seed=1))
    assert kmeanspp_inducing(X.numpy(), 40).shape == (25, 3)


def test_cholesky_jitter_and_errors():
    dup = torch.cat([X[:5], X[:5]])
    K = Kernel("se", [1.0, 1.0, 1.0])(dup, dup)
    L = cholesky(K)
    assert torch.isfinite(L).all()
    with pytest.raises(cz.NumericalError, match="Try"):
        cholesky(torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=torch.float64))
    with pytest.raises(cz.NumericalError, match="NaN"):
        cholesky(torch.tensor([[1.0, float("nan")], [0.0, 1.0]], dtype=torch.float64))


def test_bad_kernel_arguments():
    with pytest.raises(cz.DataError, match="unknown kernel"):
        Kernel("rbf2", [1.0])
    with pytest.raises(cz.DataError, match="lengthscale"):
        Kernel("se", [-1.0])


@pytest.mark.parametrize("name", ["matern32", "se"])
def test_pairs_gradient_in_lengthscale_is_finite_at_equal_inputs(name):
    """k(x_a, x_b) row by row, differentiated in ℓ where some pairs are two items with equal features:
    the gradient is finite and equals that of the kernel matrix's diagonal (at r = 0 the kernel is 1
    whatever ℓ, so those pairs add nothing)."""
    xa = torch.cat([X[:4], X[4:8]])
    xb = torch.cat([X[:4], X[8:12]])  # the first four pairs are an item and its twin
    ell = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64, requires_grad=True)
    (g_pairs,) = torch.autograd.grad(Kernel(name, ell).pairs(xa, xb).sum(), ell)
    (g_matrix,) = torch.autograd.grad(Kernel(name, ell)(xa, xb).diagonal().sum(), ell)
    assert torch.isfinite(g_pairs).all()
    torch.testing.assert_close(g_pairs, g_matrix)
    (g_twins,) = torch.autograd.grad(Kernel(name, ell).pairs(X[:4], X[:4]).sum(), ell)
    torch.testing.assert_close(g_twins, torch.zeros(3, dtype=torch.float64))
