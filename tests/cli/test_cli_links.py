"""The command line of the links models, in-process: `crowdzoo fit scdc|bayesscdc --links --items`,
`crowdzoo predict RUN --items`, `crowdzoo report RUN`, and clear errors on bad input.

The data: 60 items with string ids in three well-separated 2-D blobs, 3 accurate workers giving about
200 same/different labels as yes/no, in ';'-separated files. Small networks and few epochs keep the
file fast; the accuracy check uses BayesSCDC's pretraining, which finds separated blobs reliably."""
import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import adjusted_rand_score

from crowdzoo.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")

CENTRES = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
SMALL = ["--components", "3", "--latent-dim", "2", "--hidden", "16", "--batch-size", "20", "--no-progress",
         "--n-init", "1"]


def _blobs(n, seed, prefix="it"):
    rng = np.random.default_rng(seed)
    labels = np.repeat([0, 1, 2], n // 3)
    X = rng.normal(size=(n, 2)) * 0.4 + CENTRES[labels]
    items = pd.DataFrame({"name": [f"{prefix}{k:02d}" for k in range(n)], "x1": X[:, 0], "x2": X[:, 1]})
    return items, labels


def _links(labels, ids, seed=1, per_worker=67):
    """Labels of 3 accurate two-coin workers on random pairs, same as yes/no."""
    rng = np.random.default_rng(seed)
    rows = []
    for worker, acc in (("ann", 0.95), ("bob", 0.9), ("cy", 0.9)):
        for _ in range(per_worker):
            i, j = rng.choice(len(ids), 2, replace=False)
            same = (labels[i] == labels[j]) == (rng.random() < acc)
            rows.append((ids[i], ids[j], worker, "Yes" if same else "no"))
    return pd.DataFrame(rows, columns=["first", "second", "annotator", "same_cluster"])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("links")
    items, labels = _blobs(60, seed=0)
    _links(labels, items["name"].to_numpy()).to_csv(d / "links.csv", sep=";", index=False)
    items.to_csv(d / "items.csv", sep=";", index=False)
    new, new_labels = _blobs(15, seed=5, prefix="new")
    new.to_csv(d / "new.csv", sep=";", index=False)
    return {"dir": d, "labels": labels, "new_labels": new_labels, "ids": items["name"].to_numpy(),
            "bytes": {f: (d / f).read_bytes() for f in ("links.csv", "items.csv", "new.csv")}}


def _fit_argv(files, model, out, *extra):
    d = files["dir"]
    return ["fit", model, "--links", d / "links.csv", "--items", d / "items.csv", "--sep", ";",
            "--a-col", "first", "--b-col", "second", "--worker-col", "annotator", "--same-col",
            "same_cluster", "--id-col", "name", "--out", out, *SMALL, *extra]


def _unchanged(files):
    for f, before in files["bytes"].items():
        assert (files["dir"] / f).read_bytes() == before, f


@pytest.fixture(scope="module")
def scdc_run(files, tmp_path_factory):
    out = tmp_path_factory.mktemp("scdc") / "run"
    assert main(_fit_argv(files, "scdc", out, "--n-epochs", "3", "--seed", "0")) == 0
    return out


@pytest.fixture(scope="module")
def bayes_run(files, tmp_path_factory):
    out = tmp_path_factory.mktemp("bayes") / "run"
    argv = _fit_argv(files, "bayesscdc", out, "--pretrain", "200", "--n-epochs", "1", "--seed", "0")
    assert main(argv) == 0
    return out


def test_scdc_run_holds_clusters_workers_metrics_and_settings(files, scdc_run):
    for name in ("posterior.pt", "clusters.csv", "workers.csv", "metrics.json", "run.json"):
        assert (scdc_run / name).is_file(), name
    clusters = pd.read_csv(scdc_run / "clusters.csv")
    assert list(clusters.columns) == ["item", "cluster", "probability"]
    assert list(clusters["item"]) == list(files["ids"])
    assert clusters["probability"].between(0, 1).all() and clusters["cluster"].between(0, 2).all()
    workers = pd.read_csv(scdc_run / "workers.csv")
    assert list(workers.columns) == ["worker", "alpha", "beta", "weight", "annotations"]  # point estimates
    assert list(workers["worker"]) == ["ann", "bob", "cy"] and workers["annotations"].sum() == 201
    metrics = json.loads((scdc_run / "metrics.json").read_text())
    assert metrics["n_links"] == 201 and metrics["n_items"] == 60 and metrics["n_clusters"] == 3
    assert 1 <= metrics["clusters_used"] <= 3 and metrics["epochs"] == 3
    assert np.isfinite(metrics["final_elbo_per_item"]) and isinstance(metrics["converged"], bool)
    run = json.loads((scdc_run / "run.json").read_text())
    assert (run["model"], run["id_col"], run["sep"], run["same_col"]) == ("scdc", "name", ";", "same_cluster")
    assert run["feature_columns"] == ["x1", "x2"]
    _unchanged(files)


def test_predict_clusters_new_items_and_keeps_files_unless_overwrite(files, scdc_run, capsys):
    d = files["dir"]
    out = d / "new_clusters.csv"
    assert main(["predict", scdc_run, "--items", d / "new.csv", "-o", out]) == 0
    pred = pd.read_csv(out, sep=";")  # the run's separator
    assert list(pred.columns) == ["name", "cluster", "probability"] and len(pred) == 15
    assert pred["name"].str.startswith("new").all() and pred["probability"].between(0, 1).all()
    assert main(["predict", scdc_run, "--items", d / "new.csv", "-o", out]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["predict", scdc_run, "--items", d / "new.csv", "-o", out, "--overwrite"]) == 0
    assert main(["predict", scdc_run, "--items", d / "new.csv"]) == 0  # standard output
    assert capsys.readouterr().out.startswith("name;cluster;probability")
    _unchanged(files)


def test_bayesscdc_finds_the_blobs_reports_and_predicts(files, bayes_run, capsys):
    clusters = pd.read_csv(bayes_run / "clusters.csv")
    ari = adjusted_rand_score(files["labels"], clusters["cluster"])
    print(f"BayesSCDC from the command line: adjusted Rand index {ari:.3f}")
    assert ari > 0.8  # chance is 0; 1.0 on seeds 0-3 when this was written
    workers = pd.read_csv(bayes_run / "workers.csv")
    assert list(workers.columns) == ["worker", "alpha", "alpha_lo", "alpha_hi", "beta", "beta_lo", "beta_hi",
                                     "weight", "annotations"]
    assert ((workers["alpha_lo"] < workers["alpha"]) & (workers["alpha"] < workers["alpha_hi"])).all()
    assert ((workers["beta_lo"] < workers["beta"]) & (workers["beta"] < workers["beta_hi"])).all()
    assert main(["report", bayes_run]) == 0
    assert (bayes_run / "diagnostics.html").is_file() and "report:" in capsys.readouterr().out
    out = files["dir"] / "bayes_new.csv"
    assert main(["predict", bayes_run, "--items", files["dir"] / "new.csv", "-o", out]) == 0
    pred = pd.read_csv(out, sep=";")
    assert adjusted_rand_score(files["new_labels"], pred["cluster"]) > 0.8
    _unchanged(files)


def test_bayesscdc_resumes_from_its_checkpoint(files, tmp_path):
    """A run with --checkpoint-every keeps OUT/checkpoint.pt; --resume from it, with more epochs, ends at
    the clusters of a run of that many epochs from the start."""
    longer, short = tmp_path / "longer", tmp_path / "short"
    for out, epochs in ((longer, "4"), (short, "2")):
        assert main(_fit_argv(files, "bayesscdc", out, "--n-epochs", epochs, "--warmup", "1",
                              "--checkpoint-every", "3")) == 0
    assert (short / "checkpoint.pt").is_file()
    assert main(_fit_argv(files, "bayesscdc", short, "--n-epochs", "4", "--warmup", "1", "--resume",
                          short / "checkpoint.pt", "--overwrite")) == 0
    pd.testing.assert_frame_equal(pd.read_csv(short / "clusters.csv"), pd.read_csv(longer / "clusters.csv"))


def _error(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("crowdzoo: error:") and "Traceback" not in err
    return err


def test_bad_links_name_the_flag_column_row_and_value(files, tmp_path, capsys):
    d = files["dir"]
    out = tmp_path / "run"
    argv = _fit_argv(files, "scdc", out, "--n-epochs", "1")
    err = _error([*argv, "--same-col", "label"], capsys)
    assert "'label'" in err and "--same-col" in err and "same_cluster" in err  # the columns are listed
    err = _error([a for a in argv if a not in ("--sep", ";")], capsys)  # comma, but the file is ';'
    assert "--sep ';'" in err
    links = pd.read_csv(d / "links.csv", sep=";")
    bad = tmp_path / "bad.csv"
    links.assign(same_cluster=links["same_cluster"].where(links.index != 7, "maybe")).to_csv(
        bad, sep=";", index=False)
    err = _error([*argv, "--links", bad], capsys)
    assert "'same_cluster' (--same-col), row 7" in err and "'maybe'" in err and "yes" in err
    links.assign(second=links["second"].where(links.index != 11, "it99")).to_csv(bad, sep=";", index=False)
    err = _error([*argv, "--links", bad], capsys)
    assert "--links, column 'second' (--b-col), row 11" in err and "'it99'" in err
    bad.write_text("first;second;annotator;same_cluster\n")
    err = _error([*argv, "--links", bad], capsys)
    assert "--links" in err and "no rows" in err
    bad.write_text("")
    assert "--links" in _error([*argv, "--links", bad], capsys)
    assert not out.exists()
    _unchanged(files)


def test_options_of_the_other_kind_of_model_are_refused(files, tmp_path, capsys):
    d = files["dir"]
    out = tmp_path / "run"
    argv = _fit_argv(files, "scdc", out, "--n-epochs", "1")
    assert "--pairs" in _error([*argv, "--pairs", d / "links.csv"], capsys)
    no_links = [a for k, a in enumerate(argv) if a != "--links" and argv[k - 1] != "--links"]
    assert "--links" in _error(no_links, capsys)
    no_items = [a for k, a in enumerate(argv) if a != "--items" and argv[k - 1] != "--items"]
    assert "--items" in _error(no_items, capsys)
    assert "--ties" in _error([*argv, "--ties", "drop"], capsys)
    assert "--n-inducing" in _error([*argv, "--n-inducing", "5"], capsys)
    err = _error(["fit", "gppl", "--links", d / "links.csv", "--out", out], capsys)
    assert "--links" in err and "--pairs" in err
    assert "--pairs" in _error(["fit", "gppl", "--out", out], capsys)
    assert not out.exists()


def test_predict_needs_the_runs_columns(files, scdc_run, tmp_path, capsys):
    d = files["dir"]
    new = pd.read_csv(d / "new.csv", sep=";")
    bad = tmp_path / "new.csv"
    new.drop(columns="x2").to_csv(bad, sep=";", index=False)
    err = _error(["predict", scdc_run, "--items", bad], capsys)
    assert "'x2'" in err and "--items" in err
    new.assign(x1=new["x1"].where(new.index != 3, np.nan)).to_csv(bad, sep=";", index=False)
    err = _error(["predict", scdc_run, "--items", bad], capsys)
    assert "row 3" in err and "'new03'" in err and "'x1'" in err
    new.iloc[:0].to_csv(bad, sep=";", index=False)
    assert "no rows" in _error(["predict", scdc_run, "--items", bad], capsys)
    assert "--items" in _error(["predict", scdc_run, "--pairs", d / "links.csv"], capsys)
    assert "--items" in _error(["predict", scdc_run], capsys)


def test_a_links_run_is_replaced_only_with_overwrite(files, scdc_run, capsys):
    before = (scdc_run / "clusters.csv").read_bytes()
    err = _error(_fit_argv(files, "scdc", scdc_run, "--n-epochs", "1"), capsys)
    assert "--overwrite" in err and "clusters.csv" in err
    assert (scdc_run / "clusters.csv").read_bytes() == before
