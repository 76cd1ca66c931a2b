"""Clustering metrics of SCDC / BayesSCDC (Luo et al., NeurIPS 2018): Hungarian accuracy, NMI and AMI.

Every function compares true classes ``labels`` with predicted clusters ``pred`` (equal-length 1-D
sequences of any hashable values; only which items share a value matters).

A note on names: the paper reports "NMI", but the authors' code computes it with scikit-learn's
``adjusted_mutual_info_score``, i.e. :func:`ami` here, not :func:`nmi`. (scikit-learn's AMI default
normalisation also changed in 0.22, from geometric to arithmetic.) Report both when comparing with the
paper's tables.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import linear_sum_assignment

from .errors import DataError

__all__ = ["hungarian_accuracy", "nmi", "ami", "contingency"]


def _codes(labels, pred) -> tuple[np.ndarray, np.ndarray]:
    out = []
    for name, x in (("labels", labels), ("pred", pred)):
        arr = x.to_numpy() if isinstance(x, pd.Series | pd.Index) else np.asarray(x)
        if arr.ndim != 1:
            raise DataError(f"{name}: expected a 1-D sequence (one value per item), got shape {arr.shape}")
        codes, _ = pd.factorize(arr)
        if (codes < 0).any():
            raise DataError(f"{name}: row {int(np.flatnonzero(codes < 0)[0])}: missing value")
        out.append(codes)
    if out[0].size != out[1].size:
        raise DataError(f"labels, pred: {out[0].size} labels but {out[1].size} predictions")
    if out[0].size == 0:
        raise DataError("labels, pred: empty (no items)")
    return out[0], out[1]


def contingency(labels, pred) -> np.ndarray:
    """The (#clusters × #classes) table of counts: entry [k, c] = items in cluster k of class c
    (clusters and classes numbered in order of first appearance)."""
    y, p = _codes(labels, pred)
    C = np.zeros((p.max() + 1, y.max() + 1), dtype=np.int64)
    np.add.at(C, (p, y), 1)
    return C


def hungarian_accuracy(labels, pred) -> float:
    """Unsupervised clustering accuracy: the fraction of items whose cluster maps to their class under the
    best one-to-one mapping of clusters to classes (Hungarian algorithm, ``scipy.optimize.
    linear_sum_assignment`` on the contingency table).

    As in the SCDC code (``cluster_acc``), the table is padded to D × D with D = max(#clusters,
    #classes) and matched one to one, so with more clusters than classes only as many clusters as there
    are classes can score (with K = 50 clusters on MNIST only 10 count): the items of the other
    clusters are counted wrong. With fewer clusters than classes, some classes go unmatched.
    """
    y, p = _codes(labels, pred)
    D = max(p.max(), y.max()) + 1
    C = np.zeros((D, D), dtype=np.int64)
    np.add.at(C, (p, y), 1)
    rows, cols = linear_sum_assignment(C, maximize=True)
    return float(C[rows, cols].sum() / y.size)


def nmi(labels, pred) -> float:
    """Normalised mutual information, I(labels; pred) / mean(H(labels), H(pred)) (arithmetic mean:
    scikit-learn's ``normalized_mutual_info_score`` with ``average_method="arithmetic"``). Not what
    the SCDC code calls "nmi" (that is :func:`ami`)."""
    from sklearn.metrics import normalized_mutual_info_score

    y, p = _codes(labels, pred)
    return float(normalized_mutual_info_score(y, p, average_method="arithmetic"))


def ami(labels, pred) -> float:
    """Adjusted mutual information (scikit-learn's ``adjusted_mutual_info_score``, arithmetic
    normalisation, its default since 0.22): mutual information corrected for chance, 0 for independent
    random partitions on average and 1 for identical ones. This is what the SCDC paper's code reports
    under the name "nmi"."""
    from sklearn.metrics import adjusted_mutual_info_score

    y, p = _codes(labels, pred)
    return float(adjusted_mutual_info_score(y, p, average_method="arithmetic"))
