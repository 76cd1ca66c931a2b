"""Seeded simulators of semi-crowdsourced clustering data (SCDC / BayesSCDC, Luo et al., NeurIPS 2018).

Items with observations, a few pairs of them labelled "same cluster" (must-link, 1) or "different
clusters" (cannot-link, 0) by two-coin workers: worker m says must-link to a same-class pair with
probability α_m (sensitivity) and cannot-link to a different-class pair with probability β_m
(specificity).

- :func:`pinwheel` — the 2-D pinwheel of the SVAE experiments (Johnson et al., 2016), SCDC's toy data.
- :func:`two_coin_workers` — the paper's worker protocol: each worker labels pairs within a window of
  consecutive items of a shuffled list (window 50 → 49 pairs per worker).
- :func:`mcvc_workers` — the MCVC protocol: equal numbers of same-class and different-class pairs.
- :func:`simulate_links` — pinwheel + two-coin workers with the paper's §5.1 settings.
- :func:`digits_links` — scikit-learn's bundled 8×8 digits (offline) + MCVC workers with the UCI Face
  experiment's worker accuracies.

Every simulator takes an int ``seed`` (or a :class:`numpy.random.Generator`) and draws from
``numpy.random.default_rng(seed)``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import DataError
from .links import LinkData

__all__ = ["pinwheel", "two_coin_workers", "mcvc_workers", "simulate_links", "digits_links"]


def pinwheel(n_arms: int = 5, n_per_arm: int = 100, radial_sd: float = 0.3, tangential_sd: float = 0.05,
             rate: float = 0.25, scale: float = 10.0, seed=0):
    """The pinwheel data of the SVAE experiments (``make_pinwheel_data`` in mattjj/svae), written from
    its description.

    Each point of arm k starts at (r, t) with r ~ N(1, radial_sd²) (along x) and t ~ N(0,
    tangential_sd²) (along y), and is rotated counter-clockwise by the angle 2πk/n_arms + rate·exp(r),
    so that arms twist more the further out they reach; the result is multiplied by ``scale``. The SVAE
    experiment (``gmm_svae_synth.py``: radial 0.3, tangential 0.05, 5 arms of 100, rate 0.25) scales by
    10, hence ``scale=10.0``; these defaults are the 500 points of SCDC's Fig. 2. (SVAE rotates the
    other way round, a mirror image, which does not matter for clustering.)

    Returns
    -------
    X : (n_arms·n_per_arm, 2) float64, ordered by arm (shuffle it yourself if order matters).
    labels : (n_arms·n_per_arm,) int64, the arm of each point.
    """
    if n_arms < 1 or n_per_arm < 1:
        raise DataError(f"n_arms, n_per_arm: need at least one arm and one point per arm, got {n_arms}, "
                        f"{n_per_arm}", arg="n_arms, n_per_arm")
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(n_arms), n_per_arm)
    eps = rng.standard_normal((labels.size, 2))
    r = 1.0 + radial_sd * eps[:, 0]
    t = tangential_sd * eps[:, 1]
    angle = 2.0 * np.pi * labels / n_arms + rate * np.exp(r)
    c, s = np.cos(angle), np.sin(angle)
    X = scale * np.column_stack([c * r - s * t, s * r + c * t])
    return X, labels.astype(np.int64)


def _classes(labels) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise DataError(f"labels: expected a non-empty 1-D array (one class per item), got shape "
                        f"{labels.shape}", arg="labels")
    codes, _ = pd.factorize(labels)
    if (codes < 0).any():
        raise DataError(f"labels: row {int(np.flatnonzero(codes < 0)[0])}: missing label", arg="labels")
    return codes


def _annotated(annotated, n: int) -> np.ndarray:
    if annotated is None:
        return np.arange(n)
    arr = np.asarray(annotated)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise DataError(f"annotated: boolean mask of shape {arr.shape} for {n} items", arg="annotated")
        return np.flatnonzero(arr)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise DataError("annotated: expected item positions (a 1-D integer array) or a boolean mask",
                        arg="annotated")
    bad = np.flatnonzero((arr < 0) | (arr >= n))
    if bad.size:
        raise DataError(f"annotated: row {bad[0]}: position {arr[bad[0]]} is out of range [0, {n})",
                        arg="annotated")
    arr = np.unique(arr)
    return arr.astype(np.int64)


def _coins(name: str, x, n_workers: int) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(n_workers, float(arr))
    if arr.shape != (n_workers,):
        raise DataError(f"{name}: expected a scalar or one value per worker ({n_workers}), got shape "
                        f"{arr.shape}", arg=name)
    bad = np.flatnonzero(~((arr >= 0) & (arr <= 1)))
    if bad.size:
        raise DataError(f"{name}: worker {bad[0]}: {arr[bad[0]]} is not a probability in [0, 1]", arg=name)
    return arr


def _frame(worker, i, j, same) -> pd.DataFrame:
    return pd.DataFrame({"worker": worker.astype(np.int64), "i": i.astype(np.int64), "j": j.astype(np.int64),
                         "same": same.astype(np.int64)})


def two_coin_workers(labels, n_workers: int, alpha=0.9, beta=0.9, window: int = 50, annotated=None,
                     seed=0) -> pd.DataFrame:
    """Two-coin workers labelling pairs within windows of items (the protocol of the SCDC authors'
    ``generate_annotation.py``, ``two_coin``, written from its description).

    The items a worker may see (``annotated``: positions or a mask; default all) are shuffled. Each
    worker in turn takes the next ``window`` items of the list; when fewer than ``window`` are left the
    list is reshuffled and started again. For each position p < window − 1 of its window the worker
    labels the pair (item at p, item at q) with q uniform among the later positions p+1 … window−1, so
    every worker gives window − 1 labels (window = 50: the paper's 49). A same-class pair gets 1
    (must-link) with probability α_m, a different-class pair 0 (cannot-link) with probability β_m.

    Parameters
    ----------
    labels : (N,) true classes (any hashable values).
    alpha, beta : scalars or one value per worker.

    Returns
    -------
    DataFrame with int columns worker (0..n_workers−1), i, j (positions into ``labels``), same (0/1),
    ordered by worker; ``LinkData.from_frame(df, O)`` reads it.
    """
    cls = _classes(labels)
    items = _annotated(annotated, cls.size)
    if window < 2:
        raise DataError(f"window: need at least 2 items per window, got {window}", arg="window")
    if window > items.size:
        raise DataError(f"window: {window} items per window but only {items.size} items may be annotated",
                        arg="window")
    if n_workers < 0:
        raise DataError(f"n_workers: expected a non-negative count, got {n_workers}", arg="n_workers")
    a = _coins("alpha", alpha, n_workers)
    b = _coins("beta", beta, n_workers)
    rng = np.random.default_rng(seed)
    windows = np.empty((n_workers, window), dtype=np.int64)
    order, pos = rng.permutation(items), 0
    for m in range(n_workers):  # one shuffled list, reshuffled when exhausted: a short loop over workers
        if pos + window > order.size:
            order, pos = rng.permutation(items), 0
        windows[m] = order[pos:pos + window]
        pos += window
    p = np.arange(window - 1)
    q = p + 1 + np.floor(rng.random((n_workers, window - 1)) * (window - 1 - p)).astype(np.int64)
    q = np.minimum(q, window - 1)  # guards the (measure-zero) rounding edge
    i = windows[:, :-1].ravel()
    j = np.take_along_axis(windows, q, axis=1).ravel()
    worker = np.repeat(np.arange(n_workers), window - 1)
    same_class = cls[i] == cls[j]
    p_ml = np.where(same_class, a[worker], 1.0 - b[worker])
    same = rng.random(i.size) < p_ml
    return _frame(worker, i, j, same)


def mcvc_workers(labels, n_workers: int, alpha=0.9, beta=0.9, n_pairs: int = 200, annotated=None,
                 seed=0) -> pd.DataFrame:
    """Two-coin workers on balanced pairs (the MCVC protocol, used by SCDC's UCI Face experiment).

    Each worker labels ``n_pairs`` pairs of distinct items among ``annotated`` (positions or a mask;
    default all): n_pairs/2 pairs drawn uniformly among the same-class pairs and n_pairs/2 uniformly
    among the different-class pairs, independently per worker (a worker may draw a pair twice). The
    label is Bernoulli(α_m) for a same-class pair and Bernoulli(1 − β_m) for a different-class pair (1:
    must-link). Each worker's rows come in random order.

    Returns
    -------
    DataFrame with int columns worker, i, j, same, as :func:`two_coin_workers`.
    """
    cls = _classes(labels)
    items = _annotated(annotated, cls.size)
    if n_pairs < 0 or n_pairs % 2:
        raise DataError(f"n_pairs: expected an even, non-negative number (half same-class, half "
                        f"different-class pairs), got {n_pairs}", arg="n_pairs")
    if n_workers < 0:
        raise DataError(f"n_workers: expected a non-negative count, got {n_workers}", arg="n_workers")
    a = _coins("alpha", alpha, n_workers)
    b = _coins("beta", beta, n_workers)
    rng = np.random.default_rng(seed)
    half = n_pairs // 2
    # the annotatable items sorted by class: class c occupies [start[c], start[c] + size[c])
    c_items = cls[items]
    by_class = items[np.argsort(c_items, kind="stable")]
    _, c_code = np.unique(c_items, return_inverse=True)
    size = np.bincount(c_code)
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    code_sorted = np.sort(c_code)
    n = items.size
    total = n_workers * half
    # same class: P(first item) ∝ (size of its class − 1), second uniform among the rest of its class
    w_same = (size[code_sorted] - 1).astype(np.float64)
    # different class: P(first item) ∝ (n − size of its class), second uniform among the other classes
    w_diff = (n - size[code_sorted]).astype(np.float64)
    if total and w_same.sum() == 0:
        raise DataError("labels: no class has two annotatable items, so there are no same-class pairs",
                        arg="labels")
    if total and w_diff.sum() == 0:
        raise DataError("labels: every annotatable item is in one class, so there are no different-class "
                        "pairs", arg="labels")
    if total:
        f = rng.choice(n, size=total, p=w_same / w_same.sum())
        c = code_sorted[f]
        r = rng.integers(0, size[c] - 1)
        g = start[c] + r
        g = g + (g >= f)
        i_same, j_same = by_class[f], by_class[g]
        f = rng.choice(n, size=total, p=w_diff / w_diff.sum())
        c = code_sorted[f]
        r = rng.integers(0, n - size[c])
        g = np.where(r < start[c], r, r + size[c])
        i_diff, j_diff = by_class[f], by_class[g]
    else:
        i_same = j_same = i_diff = j_diff = np.zeros(0, dtype=np.int64)
    worker = np.concatenate([np.repeat(np.arange(n_workers), half)] * 2)
    i = np.concatenate([i_same, i_diff])
    j = np.concatenate([j_same, j_diff])
    truth_same = np.concatenate([np.ones(total, bool), np.zeros(total, bool)])
    same = rng.random(i.size) < np.where(truth_same, a[worker], 1.0 - b[worker])
    order = np.lexsort((rng.random(i.size), worker))  # by worker, random order within a worker
    return _frame(worker[order], i[order], j[order], same[order])


def _subset(rng, n: int, annotated) -> np.ndarray:
    """``annotated``: "all", a count (a random subset of that size, sorted) or positions / a mask."""
    if isinstance(annotated, str):
        if annotated != "all":
            raise DataError(f"annotated: expected 'all', a count or item positions, got {annotated!r}",
                            arg="annotated")
        return np.arange(n)
    if np.ndim(annotated) == 0:
        k = int(annotated)
        if not 0 <= k <= n:
            raise DataError(f"annotated: {k} items to annotate but there are {n}", arg="annotated")
        return np.sort(rng.choice(n, size=k, replace=False))
    return _annotated(annotated, n)


def simulate_links(n_arms: int = 5, n_per_arm: int = 100, n_annotated=100, n_workers: int = 20,
                   window: int = 50, alpha=0.9, beta=0.9, radial_sd: float = 0.3, tangential_sd: float = 0.05,
                   rate: float = 0.25, scale: float = 10.0, seed=0):
    """SCDC's pinwheel experiment (§5.1): :func:`pinwheel` points, a random subset of them shown to
    two-coin workers (:func:`two_coin_workers`).

    Defaults are the paper's: 5 arms × 100 = 500 points, 100 annotated (a random subset), 20 workers ×
    49 pairs (window 50) = 980 annotations, α_m = β_m = 0.9. ``n_annotated`` may also be ``"all"`` or
    item positions.

    Returns
    -------
    (data, truth) : ``data`` a :class:`LinkData` with the arms as ``labels`` and worker ids 0..M−1;
    ``truth`` = {"labels" (N,) arm of each point, "alpha" (M,), "beta" (M,), "annotated" (sorted
    positions of the items workers could see)}.
    """
    rng = np.random.default_rng(seed)
    X, labels = pinwheel(n_arms, n_per_arm, radial_sd, tangential_sd, rate, scale, seed=rng)
    items = _subset(rng, labels.size, n_annotated)
    df = two_coin_workers(labels, n_workers, alpha, beta, window=window, annotated=items, seed=rng)
    data = LinkData.from_arrays(df["i"].to_numpy(), df["j"].to_numpy(), df["same"].to_numpy(), X,
                                workers=df["worker"].to_numpy(), worker_ids=np.arange(n_workers),
                                labels=labels)
    return data, {"labels": labels, "alpha": _coins("alpha", alpha, n_workers),
                  "beta": _coins("beta", beta, n_workers), "annotated": items}


def digits_links(n_workers: int = 5, alpha=(0.95, 0.9, 0.85, 0.8, 0.75), beta=None, annotated=100,
                 pairs_per_worker: int = 200, protocol: str = "mcvc", seed=0):
    """scikit-learn's bundled 8×8 digits (1797 images, 10 classes; offline) with simulated workers.

    The worker settings follow SCDC's UCI Face experiment (§5.2): 5 workers with α = β = (0.95, 0.9,
    0.85, 0.8, 0.75) (``beta=None``: the same as ``alpha``) and balanced pairs (``protocol="mcvc"``,
    :func:`mcvc_workers`, ``pairs_per_worker`` even; the paper used 200–2000). ``protocol="two_coin"``
    uses :func:`two_coin_workers` with windows of pairs_per_worker + 1 items instead. ``annotated``: a
    count (a random subset of the images, 100 as in Fig. 3b), ``"all"`` (Fig. 3a) or positions.

    Observations are the 64 pixel intensities divided by 16, so in [0, 1].

    Returns
    -------
    (data, truth) as :func:`simulate_links`, with the digit classes as labels.
    """
    from sklearn.datasets import load_digits

    if protocol not in ("mcvc", "two_coin"):
        raise DataError(f"protocol: expected 'mcvc' or 'two_coin', got {protocol!r}", arg="protocol")
    digits = load_digits()
    O = digits.data.astype(np.float64) / 16.0
    labels = digits.target.astype(np.int64)
    beta = alpha if beta is None else beta
    rng = np.random.default_rng(seed)
    items = _subset(rng, labels.size, annotated)
    if protocol == "mcvc":
        df = mcvc_workers(labels, n_workers, alpha, beta, pairs_per_worker, annotated=items, seed=rng)
    else:
        df = two_coin_workers(labels, n_workers, alpha, beta, window=pairs_per_worker + 1, annotated=items,
                              seed=rng)
    data = LinkData.from_arrays(df["i"].to_numpy(), df["j"].to_numpy(), df["same"].to_numpy(), O,
                                workers=df["worker"].to_numpy(), worker_ids=np.arange(n_workers),
                                labels=labels)
    return data, {"labels": labels, "alpha": _coins("alpha", alpha, n_workers),
                  "beta": _coins("beta", beta, n_workers), "annotated": items}
