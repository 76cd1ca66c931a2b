"""EP sites of the ordered probit (ties as a third outcome): the tilted moments against high-precision
quadrature (far tails included), the binary probit site as the decided row's limit at threshold 0, and
the EP evidence against the exact marginal likelihood where EP is exact (one label per independent
utility), with its gradient in the threshold against a finite difference of refitted EP."""
from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from scipy.special import log_ndtr

from crowdzoo.inference.ep import ep_fixed_s, ep_log_evidence, ordinal_tilted_moments, probit_site_update


def _log_likelihood(z, sgn, t):
    """log P(y | z, t) on a grid z: decided rows by scipy's log Φ, a tie by mpmath at 25 digits as
    Φ(t − |z|) − Φ(−t − |z|) (the reflection that keeps both terms away from 1)."""
    if sgn != 0:
        return log_ndtr(sgn * z - t)
    with mpmath.workdps(25):
        return np.array([float(mpmath.log(mpmath.ncdf(t - x) - mpmath.ncdf(-t - x))) for x in np.abs(z)])


def _quadrature(m, v, sgn, t, n=1501):
    """(log Z, mean, variance) of N(z; m, v) P(y | z, t) by the trapezoid rule in log space on a grid
    wide enough to hold the tilted mass (it lies between m and the outcome's interval), its points at
    most a fifth of the tilted standard deviation apart: for such smooth, fast-decaying integrands the
    rule's error is of order exp(−2π² σ²/h²), far below the tolerances."""
    sd = math.sqrt(v)
    z = np.linspace(min(m, -t) - 10 * sd - 10, max(m, t) + 10 * sd + 10, n)
    log_f = -0.5 * (z - m) ** 2 / v - 0.5 * math.log(2 * math.pi * v) + _log_likelihood(z, sgn, t)
    top = log_f.max()
    f = np.exp(log_f - top)
    z0 = np.trapezoid(f, x=z)
    mean = np.trapezoid(z * f, x=z) / z0
    return math.log(z0) + top, mean, np.trapezoid((z - mean) ** 2 * f, x=z) / z0


CASES = [(m, v, sgn, t) for m in (-25.0, -2.0, 0.3, 30.0) for v in (0.05, 1.0, 20.0)
         for sgn in (-1.0, 0.0, 1.0) for t in (0.0, 0.4, 2.5) if not (sgn == 0 and t == 0.0)]


def test_tilted_moments_match_quadrature_in_the_bulk_and_the_tails():
    m, v, sgn, t = (torch.tensor(c, dtype=torch.float64) for c in zip(*CASES))
    log_z, mean, var = ordinal_tilted_moments(m, v, sgn, t)  # all rows in one vectorised call
    want = np.array([_quadrature(*c) for c in CASES])
    assert np.allclose(log_z.numpy(), want[:, 0], rtol=1e-9, atol=1e-9)
    assert np.allclose(mean.numpy(), want[:, 1], rtol=1e-7, atol=1e-8)
    assert np.allclose(var.numpy(), want[:, 2], rtol=1e-7, atol=1e-10)
    assert (var > 0).all() and (var <= v).all()  # an interval likelihood is log-concave


def test_decided_site_at_threshold_zero_is_the_binary_probit_site():
    g = torch.Generator().manual_seed(0)
    P = 200
    m = 3.0 * torch.randn(P, dtype=torch.float64, generator=g)
    v = torch.rand(P, dtype=torch.float64, generator=g) * 3 + 0.1
    tau = torch.rand(P, dtype=torch.float64, generator=g) * 0.2  # site precisions (cavity stays positive)
    nu = torch.randn(P, dtype=torch.float64, generator=g) * 0.1
    sgn = torch.where(torch.rand(P, generator=g) < 0.5, -1.0, 1.0).double()
    binary = probit_site_update(m, v, tau, nu, sgn, 0.7)
    for t in (0.0, 1e-9):
        t_p = torch.full((P,), t, dtype=torch.float64)
        ordinal = probit_site_update(m, v, tau, nu, sgn, 0.7, threshold=t_p)
        for got, want in zip(ordinal, binary):
            assert torch.allclose(got, want, rtol=1e-7, atol=1e-9)
    far = probit_site_update(m, v, tau, nu, sgn, 0.7, threshold=torch.full((P,), 0.5, dtype=torch.float64))
    assert not torch.allclose(far[1], binary[1], atol=1e-3)  # the threshold does move the sites


def _independent_problem(t=0.6, P=12, seed=1):
    """P labels, each on its own item of an independent prior f ~ N(0, diag(k)): EP is exact here."""
    g = torch.Generator().manual_seed(seed)
    k = torch.rand(P, dtype=torch.float64, generator=g) * 2 + 0.3
    sgn = torch.tensor([-1.0, 0.0, 1.0] * (P // 3), dtype=torch.float64)
    return torch.diag(k), torch.eye(P, dtype=torch.float64), sgn, k


def test_ep_evidence_is_exact_for_labels_on_independent_utilities():
    K, H, sgn, k = _independent_problem()
    t = torch.full_like(k, 0.6)
    *_, log_z, _ = ep_fixed_s(K, H, sgn, damping=0.8, tol=1e-12, max_iter=500, threshold=t)
    want = sum(_quadrature(0.0, float(kp), float(sp), 0.6)[0] for kp, sp in zip(k, sgn))
    assert abs(log_z - want) < 1e-8, (log_z, want)


def test_ep_evidence_gradient_in_the_threshold_is_the_refitted_evidence_slope():
    """At the EP fixed point the sites are stationary: d log Z_EP / dt with the sites held is the slope
    of the evidence refitted at each t (a correlated prior, where EP is not exact)."""
    g = torch.Generator().manual_seed(2)
    N, P = 6, 30
    X = torch.randn(N, 1, dtype=torch.float64, generator=g)
    K = torch.exp(-0.5 * (X - X.T) ** 2) + 1e-6 * torch.eye(N, dtype=torch.float64)
    a = torch.randint(0, N, (P,), generator=g)
    b = (a + torch.randint(1, N, (P,), generator=g)) % N
    H = torch.zeros(P, N, dtype=torch.float64)
    H[torch.arange(P), a], H[torch.arange(P), b] = 1.0, -1.0
    sgn = torch.tensor([-1.0, 0.0, 1.0] * (P // 3), dtype=torch.float64)

    def refit(t):
        t_p = torch.full((P,), t, dtype=torch.float64)
        return ep_fixed_s(K, H, sgn, tol=1e-13, max_iter=3000, threshold=t_p)

    t0, h = 0.5, 1e-5
    _, _, tau, nu, _, _ = refit(t0)
    t = torch.tensor(t0, dtype=torch.float64, requires_grad=True)
    L = torch.linalg.cholesky(K)
    grad, = torch.autograd.grad(ep_log_evidence(L, H, sgn, tau, nu, threshold=t.expand(P)), t)
    slope = (refit(t0 + h)[4] - refit(t0 - h)[4]) / (2 * h)
    assert abs(float(grad) - slope) < 1e-5 * max(1.0, abs(slope)), (float(grad), slope)


@pytest.mark.parametrize("sgn", [-1.0, 1.0])
def test_tilted_moments_stay_finite_where_the_label_is_all_but_impossible(sgn):
    m = torch.tensor([-sgn * 60.0], dtype=torch.float64)
    log_z, mean, var = ordinal_tilted_moments(m, torch.tensor([1.0], dtype=torch.float64),
                                              torch.tensor([sgn], dtype=torch.float64),
                                              torch.tensor([0.5], dtype=torch.float64))
    assert torch.isfinite(log_z).all() and torch.isfinite(mean).all() and (var > 0).all()
