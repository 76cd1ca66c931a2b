"""``scdc-crowd`` (crowdzoo/comparisons/scdc_crowd.py): PCKMeans against an independent reference, and
the comparison end to end in quick mode through the command line."""
from __future__ import annotations

import numpy as np
import pytest

from crowdzoo.cli import main
from crowdzoo.cluster_metrics import hungarian_accuracy
from crowdzoo.comparisons import REGISTRY, scdc_crowd

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _overlap(n=300, seed=0):
    rng = np.random.default_rng(seed)
    return scdc_crowd.overlapping_groups(n, rng, gap=1.5), rng


def test_pckmeans_without_links_is_kmeans_and_correct_links_lift_it():
    """With no links PCKMeans's objective is k-means's, so it ends where Lloyd's iterations from the same
    start end (scikit-learn's k-means, standardised features); with 600 correct links on overlapping
    groups it beats that by a wide margin, and with the links' labels flipped it does worse."""
    from sklearn.cluster import KMeans

    (X, y), rng = _overlap()
    none = np.zeros(0, dtype=np.int64)
    alone = scdc_crowd.pckmeans(X, 3, none, none, none.astype(bool), seed=0)
    Z = (X - X.mean(0)) / X.std(0)
    ref = KMeans(3, n_init=10, random_state=0).fit(Z).labels_
    assert hungarian_accuracy(ref, alone) == 1.0
    i, j = rng.integers(300, size=(2, 600))
    keep = i != j
    i, j = i[keep], j[keep]
    same = y[i] == y[j]
    acc = {name: hungarian_accuracy(y, scdc_crowd.pckmeans(X, 3, i, j, lab, seed=0))
           for name, lab in (("right", same), ("flipped", ~same))}
    base = hungarian_accuracy(y, alone)
    print(f"k-means {base:.3f}; PCKMeans with right links {acc['right']:.3f}, flipped {acc['flipped']:.3f}")
    assert acc["right"] > base + 0.1 and acc["flipped"] < base


def test_link_sets_are_what_the_docstring_says():
    data, K, a, b = scdc_crowd.link_set("overlapping", 0)
    assert (data.n_items, data.n_workers, data.n_annotations, K) == (500, 20, 980, 3)
    assert ((0.7 <= a) & (a <= 0.95)).all() and ((0.7 <= b) & (b <= 0.95)).all()
    data, K, _, _ = scdc_crowd.link_set("overlapping, 5,000 links", 0)
    assert (data.n_items, data.n_annotations) == (1000, 5000)
    data, K, _, _ = scdc_crowd.link_set("elongated, 1 worker", 0)
    assert (data.n_items, data.n_workers, data.n_annotations, K) == (600, 1, 100, 4)


def test_quick_run_through_the_cli(tmp_path, capsys):
    """``crowdzoo compare scdc-crowd --quick`` writes its page and CSV: every set with every method, the
    models with and without links, scores in range, and the verdict lines."""
    assert REGISTRY["scdc-crowd"] is scdc_crowd
    out = tmp_path / "scdc-crowd.md"
    assert main(["compare", "scdc-crowd", "--quick", "--out", str(out)]) == 0
    import pandas as pd

    df = pd.read_csv(out.with_suffix(".csv"))
    assert set(df["dataset"]) == set(scdc_crowd.SETS)
    methods = set(df["method"])
    assert {"SCDC", "BayesSCDC", "PCKMeans", "Gaussian mixture (full)", "k-means"} <= methods
    for (ds, m), rows in df[df["method"].isin(["SCDC", "BayesSCDC"])].groupby(["dataset", "method"]):
        anns = set(rows["annotations"])
        assert len(anns) == 2 and "none" in anns, (ds, m, anns)
    acc = df[df["metric"] == "acc"]["value"]
    assert ((acc >= 1 / 4 - 1e-9) & (acc <= 1)).all()
    text = out.read_text()
    assert text.startswith("Made by `crowdzoo compare scdc-crowd")
    assert text.count("with links against") == 2 * len(scdc_crowd.SETS)


def test_scdc_alone_fits_no_bayesscdc_and_says_so():
    """``SCDC_ALONE`` (the rerun after a change to SCDC alone): SCDC and the baselines on every set, no
    BayesSCDC row, and a verdict per set for SCDC alone."""
    df = scdc_crowd.SCDC_ALONE.run_one(0, quick=True)
    assert set(df["dataset"]) == set(scdc_crowd.SETS)
    assert "BayesSCDC" not in set(df["method"]) and "SCDC" in set(df["method"])
    text = scdc_crowd.SCDC_ALONE.summary(df)
    assert text.count("with links against") == len(scdc_crowd.SETS)
    assert "SCDC with its defaults" in text
