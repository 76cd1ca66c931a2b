"""Defaults that deserve trust: crowdGPPL's scale priors, the CLI building the API's models, the
calibration battery's crowds."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import crowdzoo as cz
from crowdzoo import cli, zoo
from crowdzoo.cli import flags
from crowdzoo.comparisons import calibration
from crowdzoo.data.simulate_panel import Panel, simulate_panel


def _crowd(name: str, seed: int = 0):
    train, test, items, users, truth, _ = calibration.crowd_data(name, seed)
    return calibration._as_data(train, items, users, True), test[test["tie"] == "no"], truth


def _log_loss(post, test):
    return float(-np.log(calibration._predict(post, zoo.entry_for(post.model), test).clip(1e-12)).mean())


def test_every_item_inducing_keeps_the_consensus_scale_under_the_default_priors(one_thread):
    """With one free utility per item (items without features: every item its own inducing point, no
    conditional variance to brake it) the paper's Gamma(1, 100) on s_t let the consensus scale run away
    on a battery crowd: E[s_t] ≈ 4·10⁻⁴, ‖m_t‖ growing eightfold over the fit and held-out log loss worse
    than a coin. The default priors keep E[s_t] near 1 and beat pooled GPPL."""
    data, test, truth = _crowd("no-features")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gppl = cz.fit(cz.GPPL(), data, progress_bar=False)
        norms = []
        paper = cz.fit(cz.CrowdGPPL.paper(), data, progress_bar=False,
                       callback=lambda i, st: norms.append(float(st.t.m.norm())))
        ours = cz.fit(cz.CrowdGPPL(), data, progress_bar=False)
    assert float(paper.s_t) < 0.01 and norms[-1] > 3 * norms[0]  # the runaway, under the paper's priors
    assert 0.1 < float(ours.s_t) < 10
    assert _log_loss(ours, test) < _log_loss(gppl, test)
    assert _log_loss(ours, test) < np.log(2) < _log_loss(paper, test)


def test_crowdgppl_component_rate_keeps_the_personal_variance_whatever_c():
    for C in (1, 5, 20, 80):
        pri = cz.CrowdGPPL(n_components=C).priors()
        mean_inv = {k: float(d.rate / (d.concentration - 1)) for k, d in pri.items()}  # E[1/s], shape > 1
        assert C * mean_inv["v"] * mean_inv["w"] == pytest.approx(4.0)
    assert cz.CrowdGPPL(rate_v0=3.0).priors()["v"].rate == 3.0
    paper = cz.CrowdGPPL.paper()
    assert (paper.n_inducing, paper.rate_t0, paper.rate_v0, paper.shape_w0) == (25, 100.0, 10.0, 1.0)


def test_auto_inducing_is_every_item_up_to_the_cap():
    from crowdzoo.gp.inducing import AUTO_INDUCING, resolve_inducing

    assert resolve_inducing("auto", 40) is None and resolve_inducing("auto", AUTO_INDUCING) is None
    assert resolve_inducing("auto", AUTO_INDUCING + 1) == AUTO_INDUCING
    assert resolve_inducing(None, 10**6) is None and resolve_inducing(30, 100) == 30
    for bad in ("all", 0, 2.5, True):
        with pytest.raises(cz.DataError, match="n_inducing"):
            resolve_inducing(bad, 100)
    X = np.random.default_rng(0).uniform(size=(AUTO_INDUCING + 20, 2))
    assert cz.GPPL().setup_features(X).M == AUTO_INDUCING
    assert cz.GPPL().setup_features(X[:50]).M == 50


def _write_coffee(tmp_path):
    train, test, items, users, _, _ = calibration.crowd_data("coffee-cli", 0)
    train.drop(columns="p_winner").to_csv(tmp_path / "train.csv", sep=";", index=False)
    items.to_csv(tmp_path / "items.csv", sep=";")
    return train, test, items, users


def test_the_cli_fits_the_python_defaults(tmp_path, one_thread):
    """The README's command on a winner-first CSV with ties and string ids, and cz.fit(CrowdGPPL(), ...)
    on the same rows: the same model, the same predictions."""
    train, test, items, users = _write_coffee(tmp_path)
    argv = ["fit", "crowdgppl", "--pairs", tmp_path / "train.csv", "--sep", ";", "--a-col", "winner",
            "--b-col", "loser", "--winner-first", "--user-col", "taster", "--items", tmp_path / "items.csv",
            "--id-col", "id", "--one-hot", "origin,roast", "--tie-col", "tie", "--ties", "half", "--out",
            tmp_path / "run", "--no-progress"]
    assert cli.main(argv) == 0
    post_cli = cz.load(tmp_path / "run" / "posterior.pt")
    assert post_cli.model == cz.CrowdGPPL()
    # the CLI's --one-hot, column for column
    feats = pd.concat([pd.get_dummies(items[c], prefix=c, prefix_sep="=", dtype=float)
                       if c in ("origin", "roast") else items[c] for c in items.columns], axis=1)
    data = cz.PairwiseData.from_frame(train, feats, a="winner", b="loser", y=None, user="taster", tie="tie",
                                      ties="half")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post_api = cz.fit(cz.CrowdGPPL(), data)
    a, b, u = test["winner"].to_numpy(), test["loser"].to_numpy(), test["taster"].to_numpy()
    np.testing.assert_allclose(post_cli.predict_proba(a, b, users=u), post_api.predict_proba(a, b, users=u),
                               rtol=1e-10, atol=1e-12)


def test_fit_help_prints_each_models_defaults(capsys):
    with pytest.raises(SystemExit):
        cli.main(["fit", "--help"])
    out = capsys.readouterr().out
    assert "model defaults" in out
    crowd = flags.model_defaults_static(zoo.entry("crowdgppl"))
    assert crowd["n_inducing"] == "auto" and crowd["n_components"] == cz.CrowdGPPL().n_components
    assert "crowdgppl: --n-inducing auto" in out and f"--components {crowd['n_components']}" in out
    assert flags.model_defaults_static(zoo.entry("gppl-per-user"))["kernel"] == cz.GPPLPerUser().kernel


def test_simulated_panel_is_a_users_kind_of_data():
    train, test, items, users, truth = simulate_panel(Panel(tie_rate=0.1, features="one-hot"), seed=3)
    assert train["taster"].map(type).eq(str).all() and items.index.str.startswith("item-").all()
    assert set(items.columns) == {"origin", "roast", "altitude_m"} and items["altitude_m"].max() > 800
    ties = pd.concat([train, test])["tie"].eq("yes").mean()
    assert 0.05 < ties < 0.15
    held = test[test["tie"] == "no"]
    assert truth["oracle"] == pytest.approx(-np.log(held["p_winner"]).mean())
    assert (test.groupby("taster").size() >= 1).all() and set(test["taster"]) <= set(train["taster"])
    _, _, _, _, det = simulate_panel(Panel(rankings=True), seed=0)
    assert det["oracle"] == pytest.approx(0.0, abs=1e-12)
    again = simulate_panel(Panel(tie_rate=0.1, features="one-hot"), seed=3)[0]
    pd.testing.assert_frame_equal(train, again)


def test_battery_scores_and_baselines():
    assert calibration.ece(np.full(10, 0.5)) == pytest.approx(0.0)
    assert calibration.ece(np.full(10, 0.9)) == pytest.approx(0.1)  # right every time at .9 (and wrong at .1)
    train = pd.DataFrame({"winner": ["x", "x", "x", "y"], "loser": ["y", "z", "z", "z"], "tie": ["no"] * 4})
    p = calibration.win_rates(train, pd.DataFrame({"winner": ["x", "z"], "loser": ["z", "x"]}))
    assert p[0] > 0.5 and p[0] + p[1] == pytest.approx(1.0)
    assert len(calibration.CROWDS) >= 10
    shapes = calibration.describe()
    assert shapes["n_items"].min() <= 10 and shapes["n_items"].max() >= 300
    assert shapes["n_users"].min() == 1 and shapes["n_users"].max() >= 2000
    assert set(shapes["features"]) >= {"none", "one-hot", "raw", "irrelevant"}
    assert set(shapes["taste"]) == {"shared", "low-rank", "communities"} and (shapes["read"] == "cli").any()


def test_battery_runs_every_pairwise_model_on_a_crowd(one_thread):
    """One small crowd through the battery: every pairwise model of the zoo scored, none failing, each
    crowd model within reach of the oracle and below a coin."""
    from crowdzoo.comparisons.calibration import CROWDS

    CROWDS["_tiny"] = (Panel(n_items=12, n_users=5, labels_per_user=20, scale=1.0), "api")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            df = calibration.score_models({e.name: (e.name, None, {}) for e in calibration.pairwise_models()},
                                          ["_tiny"], 0)
    finally:
        del CROWDS["_tiny"]
    assert set(df["model"]) == {e.name for e in calibration.pairwise_models()}
    assert "error" not in df or df["error"].isna().all()
    assert (df["log loss"] < np.log(2)).all()


def test_battery_update_reruns_only_the_crowds_asked_for(tmp_path, one_thread):
    """``update(models, md, crowds=[...])`` refits those models on those crowds alone: the other
    crowds' rows are kept as they were (here marked by an impossible log loss), the rerun row is the
    model's score on that crowd (with the oracle's, a coin's and the win rates' rows where the page had
    none), and the page says which rows were rerun and by what command."""
    from crowdzoo.comparisons.calibration import CROWDS

    CROWDS["_tiny_a"] = (Panel(n_items=8, n_users=3, labels_per_user=12, scale=1.0), "api")
    CROWDS["_tiny_b"] = (Panel(n_items=9, n_users=3, labels_per_user=12, scale=1.0), "api")
    try:
        old = pd.DataFrame([dict(seed=0, crowd=c, model=m, **{"log loss": 9.0, "ECE": 0.0, "accuracy": 0.0,
                                                            "seconds": 0.0, "oracle": 0.3, "labels": 30})
                            for c in ("_tiny_a", "_tiny_b") for m in ("bradley-terry", "gppl")])
        md = tmp_path / "cal.md"
        old.to_csv(md.with_suffix(".csv"), index=False)
        md.write_text("Made by `crowdzoo compare calibration`.\n")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            calibration.update(["bradley-terry"], md, repeats=1, crowds=["_tiny_b"])
            direct = calibration.score_models({"bradley-terry": ("bradley-terry", None, {})}, ["_tiny_b"], 0)
        with pytest.raises(cz.DataError, match="crowds.*not battery crowds"):
            calibration.update(["bradley-terry"], md, repeats=1, crowds=["nowhere"])
    finally:
        del CROWDS["_tiny_a"], CROWDS["_tiny_b"]
    new = pd.read_csv(md.with_suffix(".csv")).set_index(["crowd", "model"])["log loss"]
    assert new[("_tiny_b", "bradley-terry")] == pytest.approx(direct["log loss"].iloc[0])
    refs = new.index.get_level_values("model").isin(["oracle", "coin", "win rate"])
    assert (new[~refs].drop(("_tiny_b", "bradley-terry")) == 9.0).all()
    # a crowd the page had no reference rows for gets them with its rerun; the others are left alone
    assert set(new[refs].index.get_level_values("crowd")) == {"_tiny_b"}
    assert new[("_tiny_b", "coin")] == pytest.approx(np.log(2))
    assert "Rows of bradley-terry on _tiny_b rerun by" in md.read_text().splitlines()[0]
    assert "--crowds _tiny_b" in md.read_text().splitlines()[0]


def test_n_inducing_flag_takes_a_number_all_or_auto(tmp_path, capsys):
    base = ["fit", "crowdgppl", "--pairs", "p.csv", "--out", str(tmp_path / "r")]
    for value, expected in (("all", None), ("auto", "auto"), ("30", 30)):
        args = cli._parser().parse_args(base + ["--n-inducing", value, "--n-inducing-users", value])
        kw = cli._plan(args)["model_kw"]
        assert kw["n_inducing"] == expected and kw["n_inducing_users"] == expected
    assert "n_inducing" not in cli._plan(cli._parser().parse_args(base))["model_kw"]
    with pytest.raises(SystemExit):
        cli._parser().parse_args(base + ["--n-inducing", "every"])
    assert "expected a positive whole number, 'all' or 'auto'" in capsys.readouterr().err


def test_a_runaway_fit_warns_at_fit_time_and_in_its_report(tmp_path, one_thread):
    """The paper's priors on the battery's crowd without features: 87 % of the training labels predicted
    beyond .99, and a refit without a tenth of them scores those worse than a coin. The default priors
    on the same crowd pass without a refit; a fit whose certainty is earned (labels from full rankings,
    where the paper's priors predict a quarter of the labels beyond .99) passes after one."""
    data, _, _ = _crowd("no-features")
    with pytest.warns(cz.OverconfidenceWarning, match="worse than a coin"):
        paper = cz.fit(cz.CrowdGPPL.paper(), data, progress_bar=False)
    conf = paper.settings["confidence"]
    assert conf["verdict"] == "fail" and conf["confident_share"] > 0.5
    assert conf["held_out_log_loss"] > np.log(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", cz.OverconfidenceWarning)
        ours = cz.fit(cz.CrowdGPPL(), data, progress_bar=False)
        ranked = cz.fit(cz.CrowdGPPL.paper(), _crowd("rankings")[0], progress_bar=False)
    assert ours.settings["confidence"]["verdict"] == "pass"
    assert "held_out_log_loss" not in ours.settings["confidence"]  # no refit was needed
    assert ranked.settings["confidence"]["held_out_log_loss"] < 0.5
    rep = cz.report(paper, tmp_path / "r.md")
    assert [c.verdict for c in rep.checks if c.name.startswith("confidence")] == ["fail"]
    quiet = cz.fit(cz.CrowdGPPL.paper(), data, progress_bar=False, check_confidence=False)
    assert "confidence" not in quiet.settings


def test_no_fit_converges_before_its_batches_have_covered_the_labels():
    """On a big crowd a mini-batch bound settled within a third of one pass and the fit said "converged"
    having seen 28 % of the labels; now the stop rule waits for ⌈P / P_i⌉ iterations."""
    data, _ = cz.simulate_crowd(n_items=20, n_users=10, n_pairs=3000, n_components=2, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = cz.fit(cz.GPPL(), data, method="natgrad", likelihood="linearised", batch_size=100, tol=0.5,
                      min_iter=1, progress_bar=False)
    assert post.settings["converged"] and post.settings["iterations"] >= 30
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = cz.fit(cz.GPPL(), data, method="natgrad", tol=0.5, min_iter=1, progress_bar=False)
    assert whole.settings["converged"] and whole.settings["iterations"] < 30


def test_the_cli_and_the_api_learn_gppls_kernel_alike(tmp_path, capsys, one_thread):
    """`crowdzoo fit gppl` with its defaults and cz.fit(GPPL(), ...) on the same CSV rows learn the same
    length-scales and give the same predictions; --no-learn-kernel and learn_kernel=False both keep the
    median heuristic; `fit --help` says what the unset default does."""
    from scipy.stats import norm

    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(30, 3))
    f = np.sin(1.5 * X[:, 0]) + 0.5 * np.cos(2 * X[:, 1])
    a = rng.integers(30, size=300)
    b = (a + 1 + rng.integers(29, size=300)) % 30
    ids = np.array([f"item-{i}" for i in range(30)])
    y = (rng.random(300) < norm.cdf(f[a] - f[b])).astype(int)
    pairs = pd.DataFrame({"a": ids[a], "b": ids[b], "y": y})
    items = pd.DataFrame(X, index=pd.Index(ids, name="id"), columns=["x0", "x1", "x2"])
    pairs.to_csv(tmp_path / "pairs.csv", index=False)
    items.to_csv(tmp_path / "items.csv")
    data = cz.PairwiseData.from_frame(pairs, items)
    qa, qb = ids[:10], ids[10:20]
    for flag, kw in (([], {}), (["--no-learn-kernel"], {"learn_kernel": False})):
        out = tmp_path / f"run{len(flag)}"
        assert cli.main(["fit", "gppl", "--pairs", str(tmp_path / "pairs.csv"), "--items",
                         str(tmp_path / "items.csv"), "--out", str(out), "--no-progress", *flag]) == 0
        post_cli = cz.load(out / "posterior.pt")
        post_api = cz.fit(cz.GPPL(), data, progress_bar=False, **kw)
        assert post_cli.settings["learn_kernel"] is post_api.settings["learn_kernel"] is (not flag)
        assert post_cli.settings.get("learned_lengthscale") == post_api.settings.get("learned_lengthscale")
        np.testing.assert_allclose(post_cli.predict_proba(qa, qb), post_api.predict_proba(qa, qb),
                                   rtol=1e-10, atol=1e-12)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        cli.main(["fit", "--help"])
    helped = " ".join(capsys.readouterr().out.split())
    assert "learn_kernel; default unset (gppl natgrad, crowdgppl natgrad)" in helped
