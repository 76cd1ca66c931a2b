"""Diagnostic checks against known answers, the report's HTML / Markdown, the CLI, and (slow) the
HTML rendered by headless Chromium."""
from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from arviz_base import from_dict

import crowdzoo as cz
from crowdzoo.cli import main
from crowdzoo.diagnostics import checks as ck


def _tree(loglik, approximate=0, **groups):
    """A DataTree with a per-label log-likelihood (chains, draws, L) and whatever else is given."""
    L = loglik.shape[-1]
    g = {"log_likelihood": {"y": loglik}, "observed_data": {"y": np.ones(L, dtype=np.int64)}}
    g.update(groups)
    g.setdefault("posterior", {"f": loglik[..., :1]})
    return from_dict(g, dims={"y": ["pair"]}, attrs={"/": {"approximate": approximate, "identified": ""}})


def test_rhat_and_ess_pass_mixed_chains_and_fail_chains_that_disagree():
    rng = np.random.default_rng(0)
    good = _tree(rng.normal(size=(4, 500, 6)) - 2)
    shifted = rng.normal(size=(4, 500, 6)) - 2
    shifted[0] += 3.0  # one chain stuck elsewhere
    sticky = np.cumsum(rng.normal(size=(4, 500, 6)), axis=1) * 0.05 - 2  # random walks: tiny ESS
    v = {c.name: c for c in ck.convergence(good)}
    assert v["r̂"].verdict == "pass" and v["ESS (bulk, tail)"].verdict == "pass"
    assert {c.name: c for c in ck.convergence(_tree(shifted))}["r̂"].verdict == "fail"
    assert {c.name: c for c in ck.convergence(_tree(sticky))}["ESS (bulk, tail)"].verdict == "fail"
    # draws of an approximation are not judged by r̂
    assert all(c.verdict == "skip" for c in ck.convergence(_tree(shifted, approximate=1)))


def test_ebfmi_is_two_for_independent_energies_and_small_for_a_random_walk():
    rng = np.random.default_rng(1)
    L = np.zeros((2, 2000, 3))
    iid = rng.normal(size=(2, 2000))
    walk = np.cumsum(rng.normal(size=(2, 2000)), axis=1)
    checks = {}
    for name, energy in (("iid", iid), ("walk", walk)):
        dt = _tree(L, sample_stats={"diverging": np.zeros((2, 2000), bool), "lp": -energy,
                                    "energy": energy, "tree_depth": np.full((2, 2000), 3)})
        checks[name] = {c.name: c for c in ck.sampler(dt)}["E-BFMI"]
    assert checks["iid"].verdict == "pass" and checks["walk"].verdict == "warn"
    # E[(E_t − E_{t−1})²] / var(E) = 2 for independent energies, per chain
    assert np.allclose(checks["iid"].extra["bfmi"], 2.0, atol=0.15)
    assert checks["walk"].extra["bfmi"].max() < 0.05


def test_divergences_are_counted():
    div = np.zeros((2, 100), bool)
    div[0, :5] = True
    dt = _tree(np.zeros((2, 100, 3)), sample_stats={"diverging": div, "lp": np.zeros((2, 100))})
    c = {c.name: c for c in ck.sampler(dt)}["divergences"]
    assert c.verdict == "fail" and c.value == "5 of 200"


def test_ece_is_zero_for_exact_frequencies_and_calibration_flags_overconfidence():
    p = np.repeat([0.15, 0.45, 0.75], 20)
    y = np.concatenate([np.r_[np.ones(3), np.zeros(17)], np.r_[np.ones(9), np.zeros(11)],
                        np.r_[np.ones(15), np.zeros(5)]])
    assert ck._ece(p, y, 10)[0] == pytest.approx(0.0, abs=1e-12)
    rng = np.random.default_rng(2)
    q = rng.uniform(0.05, 0.95, 3000)
    y = (rng.random(3000) < q).astype(float)
    assert ck.calibration(q, y).verdict == "pass"
    sharp = np.where(q > 0.5, 1 - (1 - q) ** 3, q ** 3)  # overconfident: pushed towards 0 and 1
    assert ck.calibration(sharp, y, "held-out labels").verdict == "fail"
    # labels the fit has seen: the Bernoulli(p) null does not hold for them, so at most a warning
    assert ck.calibration(sharp, y).verdict == "warn"


def _ppc_tree(y, a, b, rep):
    L = y.size
    return from_dict({"observed_data": {"y": y}, "constant_data": {"a": a, "b": b},
                      "posterior_predictive": {"y": rep}, "posterior": {"f": np.zeros((1, rep.shape[1], 1))}},
                     dims={"y": ["pair"], "a": ["pair"], "b": ["pair"]},
                     coords={"pair": np.arange(L)}, attrs={"/": {"approximate": 1}})


def test_ppc_win_rates_pass_replicates_of_the_truth_and_fail_a_model_that_ignores_items():
    rng = np.random.default_rng(3)
    N, L, S = 20, 2000, 400
    f = np.linspace(-2, 2, N)
    a = rng.integers(0, N, L)
    b = (a + rng.integers(1, N, L)) % N
    p = 1 / (1 + np.exp(-(f[a] - f[b])))
    y = (rng.random(L) < p).astype(np.int64)
    good = (rng.random((1, S, L)) < p).astype(np.int64)
    flat = (rng.random((1, S, L)) < 0.5).astype(np.int64)  # every pair a coin flip
    ids = np.array([f"item{i}" for i in range(N)])
    assert ck.ppc_win_rates(_ppc_tree(y, ids[a], ids[b], good))[0].verdict == "pass"
    bad = ck.ppc_win_rates(_ppc_tree(y, ids[a], ids[b], flat))[0]
    assert bad.verdict == "fail" and "item0" in bad.detail  # the worst item is named by its id


def test_psis_loo_matches_exact_loo_and_flags_an_outlier_but_not_confident_labels():
    """y_i ~ N(θ, 1) with a flat prior: exact draws of θ | y and the closed-form leave-one-out
    predictive N(y_i; mean(y_−i), 1 + 1/(n − 1)). PSIS-LOO matches it; an outlier's k̂ passes the
    threshold (warn); confident probit labels (log Φ(z) ≈ 0 in every draw) have large k̂ but a span
    below 0.1 nats, and are counted apart."""
    from scipy.special import log_ndtr
    from scipy.stats import norm

    rng = np.random.default_rng(1)
    n, S = 40, 4000

    def loo_case(y):
        theta = rng.normal(y.mean(), 1 / np.sqrt(y.size), size=(4, S // 4))
        ll = norm.logpdf(y, theta[..., None], 1.0)
        rest = (y.sum() - y) / (y.size - 1)
        exact = norm.logpdf(y, rest, np.sqrt(1 + 1 / (y.size - 1))).sum()
        return ck.loo(_tree(ll)), exact

    c, exact = loo_case(rng.normal(0, 1, n))
    assert c.verdict == "pass", c.detail
    assert float(c.value.split()[1]) == pytest.approx(exact, abs=0.5)
    c, _ = loo_case(np.append(rng.normal(0, 1, n - 1), 30.0))
    assert c.verdict == "warn" and c.detail.startswith("1 of 40"), c.detail
    z = rng.normal(8.0, 1.0, size=(4, S // 4, n))  # f_a − f_b far from 0 in every draw
    c = ck.loo(_tree(log_ndtr(z)))
    assert c.verdict == "pass" and int(c.detail.split(";")[1].split()[0]) > 0, c.detail


def test_agreement_of_a_tree_with_itself_and_with_a_shifted_copy():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 400, 10))
    same = {c.name: c for c in ck.agreement(_tree(x), _tree(x))}
    assert same["agreement with NUTS: means"].value == "0.00 NUTS sd (log-likelihood)"
    assert same["agreement with NUTS: sds"].verdict == "pass"
    assert same["agreement with NUTS: 90 % intervals"].verdict == "pass"
    off = {c.name: c for c in ck.agreement(_tree(0.3 * x + 1.0), _tree(x))}
    assert off["agreement with NUTS: means"].verdict == "fail"
    assert off["agreement with NUTS: sds"].verdict == "fail"
    assert off["agreement with NUTS: 90 % intervals"].verdict == "fail"


def test_agreement_is_decided_by_the_worst_variable():
    """150 log-likelihood terms that match NUTS must not hide a latent variable whose sd is 0.4 of
    NUTS's (a mean-field guide's over-confidence): pooled, the median sd ratio would be ≈ 1."""
    rng = np.random.default_rng(5)
    ll = rng.normal(size=(2, 2000, 150))
    f_ref = rng.normal(size=(2, 2000, 21))
    f_guide = 0.4 * rng.normal(size=(2, 2000, 21))
    attrs = {"/": {"approximate": 1, "identified": "f"}}
    guide = from_dict({"log_likelihood": {"y": ll}, "observed_data": {"y": np.ones(150, dtype=np.int64)},
                       "posterior": {"f": f_guide}}, dims={"y": ["pair"]}, attrs=attrs)
    ref = from_dict({"log_likelihood": {"y": rng.normal(size=(2, 2000, 150))},
                     "observed_data": {"y": np.ones(150, dtype=np.int64)}, "posterior": {"f": f_ref}},
                    dims={"y": ["pair"]}, attrs=attrs)
    c = {c.name: c for c in ck.agreement(guide, ref)}
    sds, cover = c["agreement with NUTS: sds"], c["agreement with NUTS: 90 % intervals"]
    assert sds.verdict == "fail" and sds.value.endswith("(f)") and "log-likelihood 1.0" in sds.detail
    assert cover.verdict == "fail" and float(cover.value.split()[0]) == pytest.approx(0.49, abs=0.05)
    assert c["agreement with NUTS: means"].verdict == "pass"


# ------------------------------------------------------------------ the report on real fits
@pytest.fixture(scope="module")
def gppl_fits():
    data, _ = cz.simulate_gppl(n_items=8, n_pairs=100, n_features=2, seed=0)
    train, test = cz.split_pairs(data, 0.25, seed=0)
    nuts = cz.fit(cz.GPPL(), train, method="nuts", num_samples=120, warmup_steps=120, num_chains=2)
    ng = cz.fit(cz.GPPL(), train, method="natgrad", learn_kernel=False, progress_bar=False)  # NUTS's kernel
    return train, test, nuts, ng


def _images(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', html)]


def test_html_report_is_self_contained_with_verdicts_and_plots(gppl_fits, tmp_path):
    train, test, nuts, ng = gppl_fits
    rep = cz.report(ng, tmp_path / "r.html", test=test, reference=nuts)
    html = (tmp_path / "r.html").read_text()
    names = [c.name for c in rep.checks]
    assert "agreement with NUTS: means" in names and "calibration (held-out labels)" in names
    assert rep.verdict in ("pass", "warn") and all(c.verdict in ck.VERDICTS for c in rep.checks)
    imgs = _images(html)
    assert len(imgs) == len(rep.figures) >= 4 and all(i[:8] == b"\x89PNG\r\n\x1a\n" for i in imgs)
    assert "http://" not in html and "https://" not in html and "<script" not in html  # nothing to fetch
    for c in rep.checks:
        assert c.rule.replace("<", "&lt;").replace(">", "&gt;") in html


def test_nuts_report_has_rank_plots_and_sampler_checks_and_a_markdown_variant(gppl_fits, tmp_path):
    train, test, nuts, ng = gppl_fits
    rep = cz.report(nuts, tmp_path / "nuts.md", test=test)
    names = {c.name: c for c in rep.checks}
    for n in ("r̂", "ESS (bulk, tail)", "divergences", "tree depth", "E-BFMI", "PSIS-LOO"):
        assert names[n].verdict != "skip", n
    assert any(k.startswith("Rank plots") for k in rep.figures)
    md = (tmp_path / "nuts.md").read_text()
    files = sorted((tmp_path / "nuts_files").glob("*.png"))
    assert len(files) == len(rep.figures) and all(f"nuts_files/{f.name}" in md for f in files)


def test_to_arviz_names_dims_with_the_users_ids_and_marks_approximations(gppl_fits):
    train, _, nuts, ng = gppl_fits
    dt = ng.to_arviz()
    assert dt.attrs["approximate"] == 1 and dt.attrs["inference"] == "natgrad"
    assert list(dt.posterior["f"].coords["item"].values) == list(train.item_ids)
    assert list(dt.constant_data["a"].values) == list(np.asarray(train.item_ids)[train.a])
    assert "optimisation" in dt.children and "bound" in dt.optimisation
    nd = nuts.to_arviz()
    assert nd.attrs["approximate"] == 0
    assert {"diverging", "lp", "tree_depth", "energy"} <= set(nd.sample_stats.data_vars)
    assert int(nd.sample_stats["tree_depth"].max()) <= 10


def test_report_of_crowdgppl_and_collabgp(tmp_path):
    data, _ = cz.simulate_crowd(n_items=12, n_users=6, n_pairs=300, seed=0)
    post = cz.fit(cz.CrowdGPPL(n_components=3), data, method="natgrad", progress_bar=False, max_iter=100)
    rep = cz.report(post, tmp_path / "crowd.html")
    assert any("component scales" in k for k in rep.figures)
    assert any(k.startswith("Posterior utilities t") for k in rep.figures)
    cdata, _ = cz.simulate_collab(n_items=6, n_users=8, seed=0)
    cpost = cz.fit(cz.CollabGP(n_latent=2), cdata, method="ep", progress_bar=False)
    crep = cz.report(cpost, tmp_path / "collab.html")
    names = {c.name for c in crep.checks}
    assert {"PPC: item win rates", "PPC: user first-item rates", "optimisation converged"} <= names


def test_report_errors_name_the_argument(gppl_fits, tmp_path):
    train, test, nuts, ng = gppl_fits
    with pytest.raises(cz.DataError, match="path"):
        cz.report(ng, tmp_path / "r.pdf")
    with pytest.raises(cz.DataError, match="reference.*NUTS"):
        cz.report(ng, tmp_path / "r.html", reference=ng)


def test_cli_report_of_a_fit_run(tmp_path, capsys):
    data, _ = cz.simulate_gppl(n_items=10, n_pairs=100, n_features=2, seed=1)
    data.to_frame().to_csv(tmp_path / "pairs.csv", index=False)
    data.items_frame().rename_axis("id").to_csv(tmp_path / "items.csv")
    run = tmp_path / "run"
    files = ["--pairs", str(tmp_path / "pairs.csv"), "--items", str(tmp_path / "items.csv")]
    assert main(["fit", "gppl", *files, "--out", str(run), "--test-fraction", "0.2", "--no-progress"]) == 0
    assert main(["report", str(run), "-o", str(tmp_path / "rep.html")]) == 0
    out = capsys.readouterr().out
    assert "calibration (held-out labels)" in out and (tmp_path / "rep.html").stat().st_size > 10_000
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "x.html")]) == 2
    assert "no posterior.pt" in capsys.readouterr().err


@pytest.mark.slow
def test_chromium_renders_the_report_with_its_images(gppl_fits, tmp_path):
    """Headless Chromium (Debian's, `make test-slow` installs it) loads the report from disk with
    the network off; an onload hook written into a copy reports each image's decoded width."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium not found: `make test-slow` installs Debian's chromium (apt-get)")
    train, test, nuts, ng = gppl_fits
    rep = cz.report(nuts, tmp_path / "r.html", test=test)
    html = (tmp_path / "r.html").read_text()
    probe = html.replace("</body>", "<script>window.onload = () => { document.title = 'widths:' + "
                         "[...document.images].map(i => i.naturalWidth).join(','); };</script></body>")
    (tmp_path / "probe.html").write_text(probe)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000"]
    dom = subprocess.run([chromium, *flags, "--dump-dom", (tmp_path / "probe.html").as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    widths = [int(w) for w in re.search(r"<title>widths:([0-9,]*)</title>", dom).group(1).split(",")]
    assert len(widths) == len(rep.figures) and min(widths) > 100
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, *flags, "--window-size=1200,1600", f"--screenshot={shot}",
                    (tmp_path / "r.html").as_uri()], capture_output=True, timeout=120, check=True)
    assert Path(shot).stat().st_size > 20_000  # a rendered page, not a blank one


def test_a_reference_fitted_to_other_data_of_the_same_size_is_refused(gppl_fits, tmp_path):
    """A NUTS fit of other labels (the same number of them) is no reference for the agreement check."""
    train, test, nuts, ng = gppl_fits
    flipped = cz.PairwiseData.from_arrays(train.b, train.a, train.y, train.item_features)  # same size
    other = cz.fit(cz.GPPL(), flipped, method="natgrad", learn_kernel=False, progress_bar=False)
    with pytest.raises(cz.DataError, match="reference: fitted to different data"):
        cz.report(other, tmp_path / "r.md", reference=nuts)


def test_svi_says_whether_its_elbo_settled():
    """The rule on a flat and a falling run of noisy losses, and on real fits: a few hundred steps of
    svi on a small GPPL problem warn that the ELBO was still rising; a long run settles."""
    import warnings

    from crowdzoo.inference.svi import settled

    rng = np.random.default_rng(0)
    assert settled(100 + rng.normal(0, 1, 2000)) is True
    assert settled(100 + np.linspace(50, 0, 2000) + rng.normal(0, 1, 2000)) is False
    assert settled(np.ones(50)) is None  # too short to judge
    data, _ = cz.simulate_gppl(n_items=30, n_pairs=600, seed=1)
    with pytest.warns(cz.ConvergenceWarning, match="svi: the ELBO was still rising"):
        short = cz.fit(cz.GPPL(), data, method="svi", num_steps=200, lr=0.005, progress_bar=False)
    assert short.settings["converged"] is False
    with warnings.catch_warnings():
        warnings.simplefilter("error", cz.ConvergenceWarning)
        long = cz.fit(cz.GPPL(), data, method="svi", num_steps=3000, progress_bar=False)
    assert long.settings["converged"] is True


def test_loo_of_an_approximation_warns_at_most():
    """Many unreliable k̂ fail the PSIS-LOO check for MCMC draws, and warn for an approximation's (whose
    k̂ also measures its distance from the posterior)."""
    rng = np.random.default_rng(6)
    ll = rng.normal(-1, 0.1, size=(2, 200, 40))
    ll[..., :10] = -np.exp(rng.normal(0, 1.2, size=(2, 200, 10)))  # a quarter of the labels heavy-tailed
    mcmc, approx = ck.loo(_tree(ll)), ck.loo(_tree(ll, approximate=1))
    assert mcmc.verdict == "fail", mcmc.detail
    assert approx.verdict == "warn" and "warns at most" in approx.detail


# ---------------------------------------------------------------- choices among k items
@pytest.fixture(scope="module")
def survey():
    """Best–worst choices of 4 among 15 items drawn from the logit choice model at known utilities:
    400 to fit, 800 held out."""
    from crowdzoo.data import simulate_choices

    f = np.random.default_rng(5).normal(0, 1.5, 15)
    data, _ = simulate_choices(15, 1200, 4, n_features=0, link="logit", worst=True, f=f, seed=1)
    return data.subset(np.arange(400)), data.subset(np.arange(400, 1200)), f


def _softmax(f, data):
    u = np.where(data.mask, f[np.maximum(data.sets, 0)], -np.inf)
    e = np.exp(u - u.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_choice_calibration_passes_the_truth_and_fails_utilities_made_over_confident(survey):
    _, held, f = survey
    truth = ck.choice_calibration(_softmax(f, held), held.mask, held.best, where="held-out choices")
    sure = ck.choice_calibration(_softmax(5 * f, held), held.mask, held.best, where="held-out choices")
    assert truth.verdict == "pass" and sure.verdict == "fail"
    assert sure.extra["gap"] > 0.1 > abs(truth.extra["gap"])
    # ECE by another route: every member a (p, chosen) pair, grouped by tenth of p with pandas
    import pandas as pd

    p = _softmax(5 * f, held)
    hit = np.zeros(p.shape)
    hit[np.arange(held.n_rows), held.best] = 1.0
    members = pd.DataFrame({"p": p[held.mask], "hit": hit[held.mask]})
    members["bin"] = np.minimum(np.floor(members["p"] * 10), 9)
    g = members.groupby("bin")
    ece = (g.size() * (g["hit"].mean() - g["p"].mean()).abs()).sum() / len(members)
    assert sure.extra["ece"] == pytest.approx(ece, abs=1e-12)
    # on the training choices a failing ECE only warns (the null holds for unseen choices)
    train_sure = ck.choice_calibration(_softmax(5 * f, held), held.mask, held.best)
    assert train_sure.verdict == "warn"


def test_a_choice_fit_passes_its_report_and_a_wrong_model_fails_the_ppc(survey, tmp_path):
    train, held, f = survey
    post = cz.fit(cz.BradleyTerry(), train, method="map")
    rep = cz.report(post, tmp_path / "r.md", test=held)
    checks = {c.name: c for c in rep.checks}
    assert checks["calibration (held-out choices)"].verdict == "pass"
    assert checks["calibration (training choices)"].verdict in ("pass", "warn")
    assert checks["PPC: item choice rates"].verdict == "pass"
    assert checks["PPC: item worst rates"].verdict == "pass"
    assert "400 choices of 4 items (best and worst), 15 items" in (tmp_path / "r.md").read_text()
    assert any(cap.startswith("Reliability diagram") for cap in rep.figures)
    # the PPC reads each item's observed choice rate: choices that always took the least appealing
    # member are far outside the fitted model's replicates
    dt = post.to_arviz(n_draws=200)
    least = np.where(train.mask, f[np.maximum(train.sets, 0)], np.inf).argmin(1)
    dt["observed_data"]["best"].values[:] = least
    choice = {c.name: c for c in ck.ppc_choice_rates(dt)}["PPC: item choice rates"]
    assert choice.verdict == "fail"
    # observed rates by another route: each item's share of the sets offering it where it was chosen
    offered = np.bincount(train.sets[train.mask], minlength=15)
    chosen = np.bincount(train.sets[np.arange(train.n_rows), least], minlength=15)
    np.testing.assert_allclose(choice.extra["observed"], (chosen / offered)[offered > 0])
