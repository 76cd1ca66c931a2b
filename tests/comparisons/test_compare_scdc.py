"""The SCDC comparisons (``scdc-pinwheel``, ``scdc-digits``, ``scdc-mnist``) run end to end
in quick mode: their tables have the rows and columns they claim, with the paper's numbers beside ours;
the metrics are in range; the baselines beat chance on the digits; MNIST keeps each run's best
initialisation by final ELBO and, without its files, says "not run: data absent" instead of failing.

BayesSCDC's rows join by themselves once ``cz.BayesSCDC`` exists: until then the ``models`` fixture
runs the comparisons with SCDC alone, and the checks that need BayesSCDC are skipped."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import crowdzoo as cz
from crowdzoo.cli import main
from crowdzoo.comparisons import REGISTRY, scdc

HAS_BAYES = hasattr(cz, "BayesSCDC")
needs_bayes = pytest.mark.skipif(not HAS_BAYES, reason="cz.BayesSCDC is not in the zoo yet")
SCORES = ("acc", "NMI", "AMI")


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture
def models(monkeypatch):
    """The models the comparisons fit by default: SCDC and BayesSCDC, or SCDC alone until BayesSCDC
    lands."""
    if not HAS_BAYES:
        monkeypatch.setattr(scdc, "MODELS", ("SCDC",))
    return scdc.MODELS


def _by_row(df):
    return df.set_index(["method", "annotations", "metric"])["value"]


def _check_scores(v, keys, n_clusters):
    for k in keys:
        for m in SCORES:
            # AMI is adjusted for chance: a clustering at chance (a quick fit that keeps one or two
            # clusters) scores about 0, on either side
            low = -0.01 if m == "AMI" else 0.0
            assert low <= v[(*k, m)] <= 1.0, (k, m, v[(*k, m)])
        assert 1 <= v[(*k, "clusters")] <= n_clusters


def test_the_three_comparisons_are_registered():
    assert REGISTRY["scdc-pinwheel"] is scdc.pinwheel
    assert REGISTRY["scdc-digits"] is scdc.digits
    assert REGISTRY["scdc-mnist"] is scdc.mnist
    assert getattr(scdc.mnist, "needs_data_dir", False)
    assert not hasattr(scdc.pinwheel, "needs_data_dir") and not hasattr(scdc.digits, "needs_data_dir")
    assert scdc.MODELS == ("SCDC", "BayesSCDC")  # BayesSCDC is in the comparisons by default


def test_pinwheel_through_the_cli(tmp_path, models, capsys):
    out = tmp_path / "scdc-pinwheel.md"
    assert main(["compare", "scdc-pinwheel", "--quick", "--out", str(out)]) == 0
    text = out.read_text()
    made_by = f"Made by `crowdzoo compare scdc-pinwheel --repeats 1 --jobs 1 --quick --out {out}`"
    assert text.startswith(made_by)
    assert capsys.readouterr().out.strip() in text  # the table printed is the table written
    for col in ("accuracy ours (worst–best)", "accuracy paper", "NMI ours", "AMI ours",
                '"NMI" paper (= AMI)', "clusters in use ours", "final K paper"):
        assert f"| {col}" in text
    # the paper's BayesSCDC numbers, with and without annotations (good and bad initialisations)
    assert "| 96.6 % | " in text and "| 0.91; 0.806 |" in text
    assert "95.6 % (good init); 75.6 % (bad init)" in text
    assert "adjusted_mutual_info_score" in text
    df = pd.read_csv(out.with_suffix(".csv"))
    keys = {(m, a) for m in models for a in ("100 items", "none")}
    assert set(zip(df["method"], df["annotations"], strict=True)) == keys
    v = _by_row(df)
    _check_scores(v, keys, 15)
    for k in keys:
        assert v[(*k, "acc")] >= 0.2 - 1e-12  # 5 equal arms: one cluster alone scores 1/5
        assert np.isfinite(v[(*k, "elbo")]) and v[(*k, "seconds")] > 0
    for m in models:
        assert f"| {m} | 100 items | " in text and f"| {m} | none | " in text
    if not HAS_BAYES:
        assert "| BayesSCDC | 100 items | not run | 96.6 % |" in text


def test_digits_baselines_beat_chance_and_the_workers_are_scored(models):
    df = scdc.digits.run_one(0, quick=True, n_epochs=2)
    keys = {(m, a) for m in models for a in ("100 items", "all items", "none")}
    assert set(zip(df["method"], df["annotations"], strict=True)) == keys | {("k-means", "none"),
                                                                             ("Gaussian mixture", "none")}
    v = _by_row(df)
    _check_scores(v, keys, 10)
    _check_scores(v, [("k-means", "none"), ("Gaussian mixture", "none")], 10)
    # ten classes: chance is about 0.1 accuracy and 0 AMI
    assert v[("k-means", "none", "acc")] > 0.6 and v[("k-means", "none", "AMI")] > 0.5
    assert v[("Gaussian mixture", "none", "acc")] > 0.5 and v[("Gaussian mixture", "none", "AMI")] > 0.5
    weights = df[df["metric"].str.startswith("weight")]
    annotated = {k for k in keys if k[1] != "none"}
    assert set(zip(weights["method"], weights["annotations"], strict=True)) == annotated
    for k in annotated:
        w = np.array([v[(*k, f"weight[{m}]")] for m in range(5)])
        assert np.isfinite(w).all()
        assert v[(*k, "weight max abs error")] == pytest.approx(np.abs(w - scdc._true_weights()).max())
        corr = v[(*k, "weight corr")]
        assert np.isnan(corr) or -1.0 <= corr <= 1.0
    table = scdc.digits.summarise(df)
    for col in ("accuracy (worst–best)", "NMI", "AMI", "clusters in use", "worker weights: corr",
                "worker weights: max abs error"):
        assert f"| {col} |" in table
    assert "| k-means | none | " in table and "| Gaussian mixture | none | " in table
    # Fig. 3c analogue: the true weights, and a column per model fitted with annotations
    assert "| 0 | 0.95 | 5.89 |" in table and "| 4 | 0.75 | 2.20 |" in table
    for m in models:
        assert f"{m}, 100 items" in table and f"{m}, all items" in table
    assert "adjusted_mutual_info_score" in table


def test_true_worker_weights_are_twice_logit_alpha():
    np.testing.assert_allclose(scdc._true_weights(), [5.889, 4.394, 3.470, 2.773, 2.197], atol=1e-3)


def test_mnist_on_the_fixture_keeps_the_best_initialisation(tmp_path, models, monkeypatch):
    from crowdzoo.data.mnist import write_mnist_fixture

    write_mnist_fixture(tmp_path)
    calls = []
    fit = scdc._fit

    def recording(method, data, seed, n_epochs, **kw):
        post, secs, unconv = fit(method, data, seed, n_epochs, **kw)
        calls.append((method, data.n_annotations > 0, seed, float(post.trace["elbo"][-1])))
        return post, secs, unconv

    monkeypatch.setattr(scdc, "_fit", recording)
    df = REGISTRY["scdc-mnist"].run_one(3, quick=True, data_dir=str(tmp_path), n_inits=3, n_epochs=2)
    keys = [(m, a) for m in models for a in ("none", "crowd")]
    assert list(dict.fromkeys(zip(df["method"], df["annotations"], strict=True))) == keys
    assert [c[2] for c in calls] == [9, 10, 11] * len(keys)  # run 3's initialisations
    v = _by_row(df)
    _check_scores(v, keys, 10)
    for n, k in enumerate(keys):
        group = calls[3 * n:3 * n + 3]
        assert {(c[0], c[1]) for c in group} == {(k[0], k[1] == "crowd")}
        assert v[(*k, "elbo")] == max(c[3] for c in group)
        assert v[(*k, "initialisations")] == 3 and v[(*k, "items")] == 200
    table = scdc.mnist.summarise(df)
    assert scdc.NOT_RUN not in table
    assert "best of 3 initialisation(s) by final ELBO, 2 epochs each" in table
    assert "the 200 training images" in table
    for paper in ("65.92 ± 3.47 %", "0.6953 ± 0.0167", "77.64 ± 3.97 %", "81.87 ± 3.86 %", "84.24 ± 5.52 %",
                  "0.8120 ± 0.0210"):
        assert paper in table
    for m in models:
        assert f"| {m} | crowd | " in table and f"| {m} | none | " in table
    assert "adjusted_mutual_info_score" in table


def test_mnist_without_its_files_says_not_run(tmp_path, capsys):
    from crowdzoo.data.mnist import write_mnist_fixture

    assert main(["compare", "scdc-mnist", "--quick"]) == 0
    text = capsys.readouterr().out
    assert text.count(f"| {scdc.NOT_RUN} |") == 4 and "no --data-dir given" in text
    assert "| SCDC | crowd | not run: data absent | 81.87 ± 3.86 % |" in text
    assert "| BayesSCDC | none | not run: data absent | 77.64 ± 3.97 % |" in text
    df = scdc.mnist.run_one(0, quick=True, data_dir=str(tmp_path / "nowhere"))
    assert list(df["metric"]) == [scdc.NOT_RUN] and "nowhere: no such folder" in df["note"].iloc[0]
    partial = write_mnist_fixture(tmp_path / "partial")
    (partial / "crowd_annotations_mnist.npy").unlink()
    df = scdc.mnist.run_one(0, quick=True, data_dir=str(partial))
    assert "lacks crowd_annotations_mnist.npy" in df["note"].iloc[0]
    assert "lacks crowd_annotations_mnist.npy" in scdc.mnist.summarise(df)
    # a file that is there but broken is an error, not absent data
    broken = write_mnist_fixture(tmp_path / "broken")
    (broken / "train-images-idx3-ubyte.gz").write_bytes(b"not an idx file")
    with pytest.raises(cz.DataError, match="train-images-idx3-ubyte.gz"):
        scdc.mnist.run_one(0, quick=True, data_dir=str(broken))


@needs_bayes
def test_bayesscdc_gives_what_the_comparisons_read():
    """The comparisons fit ``cz.BayesSCDC`` by its default route with ``seed``, ``n_epochs`` and
    ``progress_bar`` and read its final ELBO (MNIST's best initialisation), clusters and workers."""
    data, truth = cz.simulate_links(n_arms=3, n_per_arm=10, n_annotated=20, n_workers=3, window=8, seed=0)
    post, secs, unconv = scdc._fit("BayesSCDC", data, 0, 2, n_clusters=4, latent_dim=2, hidden=(4,))
    assert np.isfinite(post.trace["elbo"][-1]) and secs > 0 and unconv in (0.0, 1.0)
    v = scdc._model_scores(post, truth["labels"])
    assert 0 <= v["acc"] <= 1 and 1 <= v["clusters"] <= 4
    assert post.workers()["weight"].shape == (3,)
