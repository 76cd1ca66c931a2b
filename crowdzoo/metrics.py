"""Metrics of the papers' tables: pairwise accuracy, cross-entropy error (CEE), Kendall's τ."""
from __future__ import annotations

import numpy as np
from scipy.stats import kendalltau


def accuracy(y, p, weights=None) -> float:
    """Fraction of labels y (P,) in {0, 1} predicted by p = P(a ≻ b) (P,); p = ½ counts half.
    ``weights`` (P,): each label counts by its weight (a label of weight w as w labels)."""
    y, p = np.asarray(y, dtype=float), np.asarray(p, dtype=float)
    return float(np.average(np.where(p == 0.5, 0.5, (p > 0.5) == (y == 1)), weights=weights))


def cross_entropy(y, p, eps: float = 1e-12, weights=None) -> float:
    """Mean cross-entropy error −[y log p + (1 − y) log(1 − p)] (nats), p clipped to [ε, 1 − ε];
    ``weights`` (P,): the mean weighted by each label's weight."""
    y = np.asarray(y, dtype=float)
    p = np.clip(np.asarray(p, dtype=float), eps, 1 - eps)
    return float(-np.average(y * np.log(p) + (1 - y) * np.log1p(-p), weights=weights))


def kendall_tau(u_true, u_pred) -> float:
    """Kendall's τ between two utility vectors (N,)."""
    return float(kendalltau(np.asarray(u_true), np.asarray(u_pred)).statistic)
