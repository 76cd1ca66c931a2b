"""The residual sweeps that end a mini-batch natgrad fit of GPPL leave q(r) at a stationary point of the
bound given q(f_m) and q(s), checked from the posterior's own predictive moments with an independent
quadrature."""
import dataclasses
import math

import numpy as np
import pytest
import torch
from scipy.special import log_ndtr

import crowdzoo as cz


def _fit(data, **kw):
    return cz.fit(cz.GPPL(n_inducing=10), data, method="natgrad", seed=0, progress_bar=False,
                  learn_kernel=False, batch_size=math.ceil(data.n_pairs / 50), **kw)


def _gradients(post, data):
    """The bound's derivatives in each item's residual mean m_i and variance S_i, with q(f_m), q(s) and
    q(s_r) held: Σ_p κ_p ∂ℓ_p/∂μ_p − E[s_r] m_i and Σ_p ∂ℓ_p/∂v_p − E[s_r]/2 + 1/(2 S_i), ℓ_p =
    E[log Φ(z_p)] for z_p ~ N(μ_p, v_p) by 80-node Gauss–Hermite quadrature (probabilists'), the GP part of
    (μ_p, v_p) from the posterior's predictive moments with the residual taken out."""
    a, b = np.asarray(data.a), np.asarray(data.b)
    ids = data.item_ids
    m, S = post.r_means[0].numpy(), post.r_vars[0].numpy()
    no_r = dataclasses.replace(post, r_means=torch.zeros_like(post.r_means),
                               r_vars=torch.zeros_like(post.r_vars))
    mu_f, v_f = (x[0].numpy() for x in no_r.pair_moments(ids[a], ids[b]))
    mu, v = mu_f + m[a] - m[b], v_f + S[a] + S[b]
    sgn = 2.0 * np.asarray(data.y, dtype=float) - 1.0  # every label here is decided, winner first
    x, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()
    sd = np.sqrt(v)
    z = sgn[:, None] * (mu[:, None] + sd[:, None] * x)
    ell = log_ndtr(z) @ w  # E[log Φ(y'z)]
    # Stein's identities: dℓ/dμ = E[(z − μ) log Φ] / v, dℓ/dv = E[((z − μ)² − v) log Φ] / (2 v²)
    lp = log_ndtr(z)
    g_mu = (lp * x) @ w / sd
    g_v = (lp * (x * x - 1.0)) @ w / (2.0 * v)
    N, Es_r = data.n_items, float(post.s_r[0])
    d_m = np.bincount(a, g_mu, N) - np.bincount(b, g_mu, N) - Es_r * m
    d_S = np.bincount(a, g_v, N) + np.bincount(b, g_v, N) - 0.5 * Es_r + 0.5 / S
    assert np.isfinite(ell).all()
    return d_m, d_S, S


def test_residual_sweeps_leave_q_r_stationary_given_q_f(many_per_item):
    """A Newton step of each item's residual mean from the bound's gradient, in posterior sds
    (|∂/∂m_i| √S_i), and the relative gap in its precision (|2 S_i ∂/∂S_i|): the last mini-batch iterate
    is far from stationary, the fit that ends with the sweeps is stationary to their tolerance."""
    data = many_per_item
    raw = _fit(data, polish=0, residual_sweeps=0)
    swept = _fit(data)
    assert swept.settings["polish"] == 0 and swept.settings["residual_sweeps"] > 0
    # the sweeps move q(r) alone: q(f_m) and q(s) are the last mini-batch iterate's
    assert torch.equal(raw.means, swept.means) and torch.equal(raw.s, swept.s)
    for post, far in ((raw, True), (swept, False)):
        d_m, d_S, S = _gradients(post, data)
        step_sd = np.max(np.abs(d_m) * np.sqrt(S))
        prec_gap = np.max(np.abs(2.0 * S * d_S))
        if far:
            assert step_sd > 0.1
        else:
            assert step_sd < 5e-3 and prec_gap < 5e-3


def test_residual_sweeps_are_refused_where_they_do_not_apply(many_per_item):
    with pytest.raises(cz.DataError, match="residual_sweeps: expected a whole number"):
        _fit(many_per_item, residual_sweeps=1.5)
    with pytest.raises(cz.DataError, match="residual_sweeps: the model has no item residual"):
        cz.fit(cz.GPPL(n_inducing=10, item_residual=False), many_per_item, method="natgrad", seed=0,
               progress_bar=False, learn_kernel=False, batch_size=500, residual_sweeps=5)
    with pytest.raises(cz.DataError, match="residual_sweeps: the full-batch steps take the exact"):
        _fit(many_per_item, likelihood="linearised", residual_sweeps=5)
