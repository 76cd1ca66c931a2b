"""Ties as a third outcome (crowdzoo.gp.ordinal): the likelihood against independent references
(the pairwise probit at τ = 0, high-precision arithmetic, Monte Carlo, autograd), the data's
``ties="model"``, the routes that refuse ties, recovery of a simulated τ and utilities, the routes'
agreement, and the tie model against ``ties="half"`` on held-out labels."""
import dataclasses
import math

import mpmath
import numpy as np
import pandas as pd
import pytest
import torch
from torch.nn.functional import logsigmoid
from torch.special import log_ndtr

import crowdzoo as cz
from crowdzoo.errors import DataError
from crowdzoo.gp.ordinal import (
    expected_log_outcome,
    outcome_codes,
    outcome_derivatives,
    outcome_log_probs,
    predictive_outcomes,
)
from crowdzoo.gp.probit import expected_log_probit
from crowdzoo.zoo import ZOO, _check_data

pytestmark = pytest.mark.usefixtures("one_thread")
D64 = torch.float64


# ---------------------------------------------------------------- the likelihood
@pytest.mark.parametrize("link, log_cdf", [("probit", log_ndtr), ("logit", logsigmoid)])
def test_at_tau_zero_the_decided_outcomes_are_the_pairwise_likelihood(link, log_cdf):
    delta = torch.linspace(-40, 40, 101, dtype=D64)
    lp = outcome_log_probs(delta, 0.0, link)
    assert torch.equal(lp[:, 2], log_cdf(delta)) and torch.equal(lp[:, 0], log_cdf(-delta))
    assert torch.all(lp[:, 1] == -math.inf)


@pytest.mark.parametrize("link", ["probit", "logit"])
def test_the_three_outcomes_sum_to_one_and_the_tie_is_exact_in_the_tails(link):
    delta = torch.tensor([-60.0, -12.0, -3.0, -0.2, 0.0, 0.7, 5.0, 30.0], dtype=D64)
    cdf = (lambda x: mpmath.ncdf(x)) if link == "probit" else (lambda x: 1 / (1 + mpmath.exp(-x)))
    mpmath.mp.dps = 50

    def log_tie(d, tau):  # F(τ − Δ) − F(−τ − Δ), written as F(τ + Δ) − F(Δ − τ) for Δ < 0: no 1 − 1
        d, tau = mpmath.mpf(d), mpmath.mpf(tau)
        return float(mpmath.log(cdf(tau - d) - cdf(-tau - d) if d >= 0 else cdf(tau + d) - cdf(d - tau)))

    for tau in (0.01, 0.05, 0.8, 6.0):
        lp = outcome_log_probs(delta, tau, link)
        assert torch.allclose(lp.exp().sum(-1), torch.ones(len(delta), dtype=D64), atol=1e-14)
        want = [log_tie(d, tau) for d in delta.tolist()]
        assert np.allclose(lp[:, 1].numpy(), want, rtol=1e-10, atol=0), (tau, lp[:, 1], want)


def test_the_derivatives_are_autograd_s():
    y = torch.tensor([0.0, 0.5, 1.0, 0.5, 1.0, 0.0, 0.5], dtype=D64)
    delta = torch.tensor([0.3, -2.0, 1.5, 7.0, -6.0, 4.0, 0.0], dtype=D64, requires_grad=True)
    tau = torch.tensor(0.7, dtype=D64, requires_grad=True)
    lp = outcome_log_probs(delta, tau).gather(-1, outcome_codes(y)[:, None])[:, 0]
    g, g_d, g_dd, g_t, g_tt = outcome_derivatives(y, delta.detach(), tau.detach())
    assert torch.allclose(g, lp.detach(), atol=1e-12)
    for i in range(len(y)):
        d1, t1 = torch.autograd.grad(lp[i], (delta, tau), create_graph=True, retain_graph=True)
        d2 = torch.autograd.grad(d1[i], delta, retain_graph=True)[0][i]
        t2 = torch.autograd.grad(t1, tau, retain_graph=True)[0]
        got = torch.stack([d1[i], t1, d2, t2]).detach()
        assert torch.allclose(got, torch.stack([g_d[i], g_t[i], g_dd[i], g_tt[i]]), atol=1e-9), i


def test_gauss_hermite_expectation_matches_monte_carlo_and_the_probit_at_tau_zero():
    y = torch.tensor([1.0, 0.5, 0.0, 0.5], dtype=D64)
    mu = torch.tensor([0.8, -0.4, 1.2, 2.5], dtype=D64)
    var = torch.tensor([0.3, 1.5, 0.7, 0.2], dtype=D64)
    tau = 0.6
    ell, d_mu, d_var, d_tau, _ = expected_log_outcome(y, mu, var, tau)
    g = torch.Generator().manual_seed(0)
    delta = mu + var.sqrt() * torch.randn(400_000, 4, generator=g, dtype=D64)
    vals, g_d, g_dd, g_t, _ = outcome_derivatives(y, delta, torch.tensor(tau, dtype=D64))
    for gh, mc in ((ell, vals), (d_mu, g_d), (d_var, 0.5 * g_dd), (d_tau, g_t)):
        se = mc.std(0) / math.sqrt(len(mc))
        assert torch.all((gh - mc.mean(0)).abs() < 4 * se + 1e-6), (gh, mc.mean(0), se)
    decided = torch.tensor([1.0, 0.0, 1.0], dtype=D64)
    ours = expected_log_outcome(decided, mu[:3], var[:3], 0.0)[:3]
    for a, b in zip(ours, expected_log_probit(decided, mu[:3], var[:3])):
        assert torch.allclose(a, b, atol=1e-12)


def test_predictive_outcomes_are_the_gaussian_average_of_the_likelihood():
    mu = torch.tensor([-1.0, 0.0, 0.4, 2.0], dtype=D64)
    var = torch.tensor([0.5, 2.0, 0.1, 1.0], dtype=D64)
    closed = predictive_outcomes(mu, var, 0.5)
    g = torch.Generator().manual_seed(1)
    delta = mu + var.sqrt() * torch.randn(400_000, 4, generator=g, dtype=D64)
    mc = outcome_log_probs(delta, 0.5).exp().mean(0)[:, [2, 1, 0]]  # (p_a, p_tie, p_b)
    assert torch.allclose(closed, mc, atol=3e-3)
    assert torch.allclose(closed.sum(-1), torch.ones(4, dtype=D64))


# ---------------------------------------------------------------- data
def _frame():
    return pd.DataFrame({"a": ["x", "y", "z", "x"], "b": ["y", "z", "x", "z"], "y": [1.0, 0.5, 0.0, 0.5]})


def test_from_frame_keeps_each_tie_as_one_label_and_leaves_the_frame_alone():
    df = _frame()
    before = df.copy()
    d = cz.PairwiseData.from_frame(df, ties="model")
    pd.testing.assert_frame_equal(df, before)
    assert d.has_ties and d.n_pairs == 4 and list(d.source_rows) == [0, 1, 2, 3]
    assert list(d.y) == [1.0, 0.5, 0.0, 0.5]
    back = d.to_frame()
    assert list(back.y) == [1.0, 0.5, 0.0, 0.5] and list(back.a) == list(df.a)
    flagged = cz.PairwiseData.from_frame(df.assign(y=[1, 1, 0, 0], t=[0, 1, 0, 1]), tie="t", ties="model")
    assert list(flagged.y) == [1.0, 0.5, 0.0, 0.5]
    assert not cz.PairwiseData.from_frame(df, ties="half").has_ties


def test_from_arrays_takes_a_tie_only_when_asked():
    X = np.arange(3.0)[:, None]
    with pytest.raises(DataError, match="ties='model'") as err:
        cz.PairwiseData.from_arrays([0, 1], [1, 2], [1.0, 0.5], X)
    assert err.value.arg == "y" and err.value.row == 1
    d = cz.PairwiseData.from_arrays([0, 1], [1, 2], [1.0, 0.5], X, ties="model")
    assert d.has_ties
    with pytest.raises(DataError, match=r"outside \{0, 0.5, 1\}"):
        cz.PairwiseData.from_arrays([0, 1], [1, 2], [1.0, 0.3], X, ties="model")


def test_routes_without_a_tie_likelihood_refuse_ties_and_name_those_with_one():
    data, _ = cz.simulate_gppl(n_items=8, n_pairs=40, tau=0.6, seed=0)
    gppl = next(e for e in ZOO if e.name == "gppl")
    natgrad_only = dataclasses.replace(gppl, ties=("natgrad",))  # a model whose ep route had no ties
    with pytest.raises(DataError, match="method='natgrad'") as err:
        _check_data(natgrad_only, data, "ep")
    assert err.value.arg == "y" and data.y[err.value.row] == 0.5
    crowd = cz.PairwiseData.from_arrays(data.a, data.b, data.y, data.item_features, users=data.a % 2,
                                        ties="model")
    which = r"a model with a tie likelihood \(gppl, crowdgppl, bradley-terry, dpm\)"
    with pytest.raises(DataError, match=which):
        cz.fit(cz.CollabGP(), crowd, method="ep")
    with pytest.raises(DataError, match="likelihood='exact'"):
        cz.fit(cz.GPPL(), data, method="natgrad", likelihood="linearised")


# ---------------------------------------------------------------- recovery and agreement
def test_bradley_terry_map_recovers_tau_and_the_utilities():
    rng = np.random.default_rng(5)
    N, P, tau = 8, 1000, 0.7
    f = rng.normal(0.0, 1.0, N)
    a = rng.integers(0, N, P)
    b = (a + rng.integers(1, N, P)) % N
    p = predictive_outcomes(torch.as_tensor(f[a] - f[b]), torch.zeros(P, dtype=D64), tau).numpy()
    y = np.array([1.0, 0.5, 0.0])[(rng.random(P)[:, None] > p.cumsum(1)).sum(1)]
    data = cz.PairwiseData.from_arrays(a, b, y, np.zeros((N, 0)), ties="model")
    post = cz.fit(cz.BradleyTerry(link="probit"), data, method="map", check_confidence=False)
    est = post.utilities()[0].to_numpy()
    assert abs(float(post.tau[0]) - tau) < 0.08
    assert np.abs((est - est.mean()) - (f - f.mean())).max() < 0.25
    # ArviZ's per-row log-likelihood is that of the observed outcome under predict_outcomes
    idata = post.to_arviz(n_draws=2)
    ll = idata["log_likelihood"]["y"].values[0, 0]
    probs = post.predict_outcomes(data.item_ids[a], data.item_ids[b]).to_numpy()
    k = np.rint(2 * (1 - y)).astype(int)
    assert np.allclose(ll, np.log(probs[np.arange(P), k]), atol=1e-10)


def test_gppl_natgrad_recovers_tau_and_the_utilities():
    data, f = cz.simulate_gppl(n_items=25, n_pairs=1500, s=0.5, tau=0.6, seed=7)
    post = cz.fit(cz.GPPL(), data, method="natgrad", check_confidence=False)
    assert abs(float(post.tau[0]) - 0.6) < 0.1
    assert np.corrcoef(post.utilities()[0].to_numpy(), f)[0, 1] > 0.95
    probs = post.predict_outcomes(data.item_ids[:5], data.item_ids[5:10])
    assert list(probs.columns) == ["p_a", "p_tie", "p_b"] and np.allclose(probs.sum(1), 1.0)
    # P(a ≻ b) on a tie fit is the decided share
    p = post.predict_proba(data.item_ids[:5], data.item_ids[5:10])
    assert np.allclose(p, probs.p_a / (probs.p_a + probs.p_b))


def test_a_fit_without_ties_predicts_no_ties_and_a_tie_fit_saves_and_loads(tmp_path):
    plain, _ = cz.simulate_gppl(n_items=8, n_pairs=60, seed=1)
    post = cz.fit(cz.GPPL(), plain, method="natgrad", check_confidence=False)
    out = post.predict_outcomes(plain.item_ids[:3], plain.item_ids[3:6])
    assert np.all(out.p_tie == 0) and np.allclose(out.p_a, post.predict_proba(plain.item_ids[:3],
                                                                                plain.item_ids[3:6]))
    ties, _ = cz.simulate_gppl(n_items=8, n_pairs=60, tau=0.5, seed=1)
    post = cz.fit(cz.GPPL(), ties, method="natgrad", check_confidence=False)
    post.save(tmp_path / "p.pt")
    back = cz.load(tmp_path / "p.pt")
    pd.testing.assert_frame_equal(back.predict_outcomes(ties.item_ids[:3], ties.item_ids[3:6]),
                                  post.predict_outcomes(ties.item_ids[:3], ties.item_ids[3:6]))


@pytest.mark.slow
def test_nuts_svi_and_natgrad_agree_on_a_tiny_tie_problem():
    """τ's posterior mean within 0.05 and each predicted outcome within 0.03 of NUTS's (about 20 s)."""
    data, _ = cz.simulate_gppl(n_items=10, n_pairs=120, s=0.5, tau=0.5, seed=4)
    a, b = data.item_ids[[0, 1, 2, 3]], data.item_ids[[4, 5, 6, 7]]
    settings = {"nuts": dict(num_samples=300, warmup_steps=200, num_chains=1),
                "svi": dict(num_steps=600, lr=0.03),
                "natgrad": dict(max_iter=300, tol=1e-6, learn_kernel=False)}  # NUTS's and svi's kernel
    fits = {m: cz.fit(cz.GPPL(), data, method=m, check_confidence=False, **kw) for m, kw in settings.items()}
    ref = fits["nuts"].predict_outcomes(a, b).to_numpy()
    for m in ("svi", "natgrad"):
        assert abs(float(fits[m].tau.mean()) - float(fits["nuts"].tau.mean())) < 0.05, m
        assert np.abs(fits[m].predict_outcomes(a, b).to_numpy() - ref).max() < 0.03, m


def test_the_tie_model_beats_half_labels_on_held_out_outcomes():
    """Held-out three-way log loss: the tie model's own probabilities against ``ties="half"``'s
    implied ones (its P(a ≻ b) = p with the training share t of ties: (1 − t)p, t, (1 − t)(1 − p),
    the best constant tie rate it could offer); on the decided held-out labels the tie model's
    P(a ≻ b | not a tie) is no worse than the half fit's p."""
    data, _ = cz.simulate_gppl(n_items=30, n_pairs=1600, s=0.3, tau=0.8, seed=11)
    frame, items = data.to_frame(), data.items_frame()
    test = np.random.default_rng(0).random(len(frame)) < 0.25
    train = frame[~test]
    fit = {how: cz.fit(cz.GPPL(), cz.PairwiseData.from_frame(train, items, ties=how), method="natgrad",
                       check_confidence=False) for how in ("model", "half")}
    held = frame[test]
    y = held.y.to_numpy()
    k = np.rint(2 * (1 - y)).astype(int)  # a ≻ b: 0, tie: 1, b ≻ a: 2
    rows = np.arange(len(y))
    ours = fit["model"].predict_outcomes(held.a.to_numpy(), held.b.to_numpy()).to_numpy()
    p = fit["half"].predict_proba(held.a.to_numpy(), held.b.to_numpy())
    t = float((train.y == 0.5).mean())
    half = np.column_stack([(1 - t) * p, np.full_like(p, t), (1 - t) * (1 - p)])
    loss = {name: -np.log(q[rows, k]).mean() for name, q in (("model", ours), ("half", half))}
    assert loss["model"] < loss["half"] - 0.02, loss
    decided = y != 0.5
    p_model = fit["model"].predict_proba(held.a.to_numpy(), held.b.to_numpy())
    cee = {name: cz.metrics.cross_entropy(y[decided], q[decided])
           for name, q in (("model", p_model), ("half", p))}
    assert cee["model"] <= cee["half"] + 0.01, cee


def test_cli_ties_model_writes_p_tie(tmp_path):
    from crowdzoo.cli import main

    data, _ = cz.simulate_gppl(n_items=10, n_pairs=80, tau=0.5, seed=2)
    frame = data.to_frame()
    frame.to_csv(tmp_path / "pairs.csv", index=False)
    data.items_frame().rename_axis("id").to_csv(tmp_path / "items.csv")
    code = main(["fit", "bradley-terry", "--pairs", str(tmp_path / "pairs.csv"), "--ties", "model",
                 "--out", str(tmp_path / "run"), "--no-progress"])
    assert code == 0
    pred = pd.read_csv(tmp_path / "run" / "predictions.csv")
    assert len(pred) == len(frame) and pred.p_tie.between(0, 1).all() and pred.p_tie.gt(0).all()


def test_the_report_calibrates_three_outcomes_and_checks_tie_rates(tmp_path):
    from crowdzoo.diagnostics.report import report

    data, _ = cz.simulate_gppl(n_items=15, n_pairs=400, tau=0.6, seed=3)
    train, test = cz.split_pairs(data, test_fraction=0.25, seed=0)
    post = cz.fit(cz.GPPL(), train, method="natgrad", check_confidence=False)
    checks = {c.name: c for c in report(post, tmp_path / "r.md", test=test, n_draws=100).checks}
    for name in ("PPC: item tie rates", "calibration (training labels: P(tie))",
                 "calibration (held-out labels: P(tie))",
                 "calibration (held-out labels, decided: P(a ≻ b) given no tie)"):
        assert checks[name].verdict in ("pass", "warn"), (name, checks[name])
    assert "calibration (training labels)" not in checks  # the two-way check would misread ties
    # a tie model that never predicts ties fails its held-out P(tie) calibration
    never = dataclasses.replace(post, tau=torch.full_like(post.tau, 1e-6))
    bad = {c.name: c for c in report(never, tmp_path / "n.md", test=test, n_draws=100).checks}
    assert bad["calibration (held-out labels: P(tie))"].verdict == "fail"


def test_crowdgppl_natgrad_recovers_the_crowds_tau_and_predicts_per_user():
    data, truth = cz.simulate_crowd(n_items=15, n_users=8, n_pairs=1000, n_components=2, s_t=0.5, tau=0.5,
                                    seed=2)
    post = cz.fit(cz.CrowdGPPL(n_components=2), data, method="natgrad", check_confidence=False)
    assert abs(float(post.tau[0]) - 0.5) < 0.1
    assert np.corrcoef(post.utilities()[0].to_numpy(), truth["t"])[0, 1] > 0.85
    a, b, users = data.item_ids[:4], data.item_ids[4:8], data.user_ids[:4]
    probs = post.predict_outcomes(a, b, users=users)
    assert np.allclose(probs.sum(1), 1.0) and (probs.p_tie > 0).all()
    p = post.predict_proba(a, b, users=users)
    assert np.allclose(p, probs.p_a / (probs.p_a + probs.p_b))
    # the same pairs for the consensus differ from the personal ones (users matter)
    assert not np.allclose(post.predict_outcomes(a, b).to_numpy(), probs.to_numpy(), atol=1e-3)


@pytest.mark.slow
def test_crowdgppl_natgrad_agrees_with_nuts_on_a_tie_crowd():
    """τ within 0.05 and each personal outcome within 0.04 of NUTS's (about 2.5 min)."""
    data, _ = cz.simulate_crowd(n_items=15, n_users=8, n_pairs=600, n_components=2, s_t=0.5, tau=0.5, seed=2)
    a, b, users = data.item_ids[:6], data.item_ids[6:12], data.user_ids[:6]
    fits = {m: cz.fit(cz.CrowdGPPL(n_components=2), data, method=m, check_confidence=False, **kw)
            for m, kw in (("nuts", dict(num_samples=200, warmup_steps=200, num_chains=1)), ("natgrad", {}))}
    assert abs(float(fits["natgrad"].tau[0]) - float(fits["nuts"].tau.mean())) < 0.05
    ours, ref = (fits[m].predict_outcomes(a, b, users=users).to_numpy() for m in ("natgrad", "nuts"))
    assert np.abs(ours - ref).max() < 0.04


def test_the_confidence_check_scores_decided_labels_of_a_tie_fit():
    """fit's over-confidence check reads P(a ≻ b | not a tie) on decided labels only: a predictor
    sure of every decided label (all a ≻ b here) scores log loss −log .99 on the held-out ones, where
    counting each tie as half a win each way would have charged it ½ (−log .99 − log .01) per tie."""
    from crowdzoo.diagnostics.confidence import confident_share, held_out_log_loss

    rng = np.random.default_rng(0)
    a = rng.integers(0, 10, 200)
    b = (a + rng.integers(1, 10, 200)) % 10
    y = np.where(rng.random(200) < 0.3, 0.5, 1.0)
    data = cz.PairwiseData.from_arrays(a, b, y, np.zeros((10, 0)), ties="model")

    class Sure:  # predicts P(a ≻ b | not a tie) = .99 for every pair
        def predict_proba(self, a, b, **kw):
            return np.full(len(a), 0.99)

    loss = held_out_log_loss(lambda train: Sure(), data, users=False)
    assert loss == pytest.approx(-np.log(0.99), abs=1e-12)
    assert confident_share(Sure(), data, users=False) == 0.0  # .99 is not beyond .99
    ties_only = cz.PairwiseData.from_arrays(a[:30], b[:30], np.full(30, 0.5), np.zeros((10, 0)), ties="model")
    assert np.isnan(held_out_log_loss(lambda train: Sure(), ties_only, users=False))
    assert confident_share(Sure(), ties_only, users=False) == 0.0
