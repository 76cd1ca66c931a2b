"""Clustering metrics: Hungarian accuracy against brute force, NMI and AMI against their definitions."""
import itertools

import numpy as np
import pytest
from sklearn.metrics import adjusted_mutual_info_score, normalized_mutual_info_score

from crowdzoo.cluster_metrics import ami, contingency, hungarian_accuracy, nmi
from crowdzoo.errors import DataError


def brute_force_accuracy(labels, pred):
    """Best one-to-one mapping of clusters to classes, by trying every permutation of D slots."""
    _, y = np.unique(labels, return_inverse=True)
    _, p = np.unique(pred, return_inverse=True)
    D = max(y.max(), p.max()) + 1
    best = 0
    for perm in itertools.permutations(range(D)):
        mapped = np.asarray(perm)[p]  # cluster k → class perm[k]; slots ≥ #classes never match
        best = max(best, int(np.sum(mapped == y)))
    return best / y.size


@pytest.mark.parametrize("n_classes, n_clusters", [(2, 2), (3, 3), (3, 5), (5, 3), (4, 4), (2, 5), (5, 5)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hungarian_equals_brute_force(n_classes, n_clusters, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, 60)
    # predictions correlated with the truth, plus noise
    p = np.where(rng.random(60) < 0.6, (y * 7 + seed) % n_clusters, rng.integers(0, n_clusters, 60))
    assert hungarian_accuracy(y, p) == pytest.approx(brute_force_accuracy(y, p))


def test_hungarian_conventions():
    y = np.array([0, 0, 1, 1, 2, 2])
    assert hungarian_accuracy(y, [5, 5, 3, 3, 9, 9]) == 1.0
    assert hungarian_accuracy(list("aabbcc"), ["x", "x", "y", "y", "z", "z"]) == 1.0
    # more clusters than classes: only as many clusters as classes can score
    assert hungarian_accuracy([0, 0, 0, 0], [0, 1, 2, 3]) == 0.25
    # fewer clusters than classes
    assert hungarian_accuracy(y, [0, 0, 0, 0, 1, 1]) == pytest.approx(4 / 6)
    # rows: clusters in order of first appearance (1, then 0)
    np.testing.assert_array_equal(contingency(y, [1, 1, 0, 0, 0, 1]), [[2, 0, 1], [0, 2, 1]])


def entropy(x):
    _, counts = np.unique(x, return_counts=True)
    q = counts / counts.sum()
    return -np.sum(q * np.log(q))


def test_nmi_from_its_definition():
    rng = np.random.default_rng(3)
    for _ in range(4):
        y = rng.integers(0, 4, 80)
        p = np.where(rng.random(80) < 0.5, y, rng.integers(0, 6, 80))
        joint = np.array([f"{a}|{b}" for a, b in zip(y, p)])
        mi = entropy(y) + entropy(p) - entropy(joint)
        assert nmi(y, p) == pytest.approx(mi / ((entropy(y) + entropy(p)) / 2))
        assert nmi(y, p) == pytest.approx(normalized_mutual_info_score(y, p))
        assert ami(y, p) == pytest.approx(adjusted_mutual_info_score(y, p))
        # any hashable values: only the partition matters
        names = np.array(list("abcdef"))
        assert nmi(names[y], names[p]) == pytest.approx(nmi(y, p))
        assert ami(names[y], p) == pytest.approx(ami(y, p))
    assert nmi([0, 0, 1, 1], [1, 1, 0, 0]) == pytest.approx(1.0)
    assert ami([0, 0, 1, 1], ["q", "q", "r", "r"]) == pytest.approx(1.0)


def test_metric_errors():
    with pytest.raises(DataError, match="3 labels but 2 predictions"):
        hungarian_accuracy([0, 1, 1], [0, 1])
    with pytest.raises(DataError, match="empty"):
        nmi([], [])
    with pytest.raises(DataError, match=r"pred: row 1: missing value"):
        ami([0, 1], [0, None])
