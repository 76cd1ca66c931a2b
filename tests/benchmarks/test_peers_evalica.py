"""The evalica peer of ``make bench-peers`` (benchmarks/peers/peer_evalica.py): its conversions of scores
into the probabilities of the three outcomes are probabilities with the right limits, and — where
evalica is installed (it lives in .venv-peers, not in crowdzoo's venv, so those tests skip otherwise)
— evalica's estimates are where the likelihoods written with those conversions peak: the conversion
is the model evalica fits, not another one."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "peers"))
import peer_evalica as pe  # noqa: E402


def test_the_conversions_are_probabilities_with_the_right_limits():
    rng = np.random.default_rng(0)
    px, py = np.exp(rng.normal(size=50)), np.exp(rng.normal(size=50))
    d = pe.davidson(px, py, 0.3)
    assert np.allclose(d.sum(1), 1.0) and (d > 0).all()
    np.testing.assert_allclose(pe.davidson(py, px, 0.3), d[:, ::-1])  # the pair the other way round
    bt = pe.bradley_terry_p(px, py)
    np.testing.assert_allclose(pe.davidson(px, py, 0.0), np.column_stack([bt, 0 * bt, 1 - bt]))
    assert np.allclose(pe.davidson(px, px, 0.5), 1 / 3)  # equal scores, v = ½: three equally likely outcomes
    np.testing.assert_allclose(d[:, 0] / (d[:, 0] + d[:, 2]), bt)  # given no tie: Bradley–Terry
    w = pe.with_tie_rate(bt, 0.2)
    assert np.allclose(w.sum(1), 1.0) and (w[:, 1] == 0.2).all()
    np.testing.assert_allclose(w[:, 0] / (w[:, 0] + w[:, 2]), bt)
    r = rng.normal(1000, 100, size=(2, 50))
    np.testing.assert_allclose(pe.elo_p(*r), 1 / (1 + np.exp(-(r[0] - r[1]) * np.log(10) / 400)))
    np.testing.assert_allclose(pe.elo_p(*r) + pe.elo_p(r[1], r[0]), 1.0)


def _davidson_labels(pi, v, n, seed):
    """Labels (x, y, outcome 0: x ≻ y, 1: tie, 2: y ≻ x) drawn from Davidson's model, written out here."""
    rng = np.random.default_rng(seed)
    x = rng.integers(len(pi), size=n)
    y = (x + 1 + rng.integers(len(pi) - 1, size=n)) % len(pi)
    tie = 2 * v * np.sqrt(pi[x] * pi[y])
    u = rng.random(n) * (pi[x] + pi[y] + tie)
    return x, y, np.where(u < pi[x], 0, np.where(u < pi[x] + pi[y], 2, 1))


def _gradient(loglik, theta, h=1e-6):
    return np.array([(loglik(theta + h * e) - loglik(theta - h * e)) / (2 * h) for e in np.eye(len(theta))])


def test_newmans_estimate_is_the_peak_of_the_davidson_likelihood_the_adapter_writes():
    evalica = pytest.importorskip("evalica")
    import pandas as pd

    pi, v = np.exp(np.random.default_rng(1).normal(0, 0.8, 8)), 0.4
    x, y, k = _davidson_labels(pi, v, 4000, seed=2)
    won = {0: evalica.Winner.X, 1: evalica.Winner.Draw, 2: evalica.Winner.Y}
    res = evalica.newman(list(x), list(y), [won[o] for o in k], index=pd.Index(range(8)), tolerance=1e-12,
                         limit=10_000)
    est = res.scores.reindex(range(8)).to_numpy(dtype=float)
    assert abs(res.v - v) < 0.05
    rows = np.arange(len(k))

    def loglik(theta, factor=2.0):
        p, w = np.exp(theta[:-1]), np.exp(theta[-1])
        probs = pe.davidson(p[x], p[y], w * factor / 2.0)
        return np.log(probs[rows, k]).sum()

    theta = np.r_[np.log(est), np.log(res.v)]
    assert np.abs(_gradient(loglik, theta)).max() < 1e-3
    # the same scores read with P(tie) = v √(π_x π_y) / D (no factor 2) are far from that peak
    assert abs(_gradient(lambda t: loglik(t, factor=1.0), theta)[-1]) > 100


def test_evalicas_bradley_terry_is_the_peak_of_ties_counted_as_half_wins():
    evalica = pytest.importorskip("evalica")
    import pandas as pd

    pi = np.exp(np.random.default_rng(3).normal(0, 0.8, 8))
    x, y, k = _davidson_labels(pi, 0.3, 3000, seed=4)
    won = {0: evalica.Winner.X, 1: evalica.Winner.Draw, 2: evalica.Winner.Y}
    res = evalica.bradley_terry(list(x), list(y), [won[o] for o in k], index=pd.Index(range(8)),
                                tolerance=1e-12, limit=10_000)
    est = res.scores.reindex(range(8)).to_numpy(dtype=float)
    weight = np.where(k == 0, 1.0, np.where(k == 1, 0.5, 0.0))  # x's share of the win

    def loglik(theta):
        p = pe.bradley_terry_p(np.exp(theta[x]), np.exp(theta[y]))
        return (weight * np.log(p) + (1 - weight) * np.log1p(-p)).sum()

    assert np.abs(_gradient(loglik, np.log(est))).max() < 1e-3
