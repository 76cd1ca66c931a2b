"""Simulation-based calibration (crowdzoo.comparisons.sbc): calibrated posteriors give uniform ranks,
miscalibrated ones do not, and ``crowdzoo compare sbc`` runs it."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crowdzoo.cli import main
from crowdzoo.comparisons import REGISTRY, sbc


def _conjugate_ranks(S: int, L: int, shrink: float = 1.0, seed: int = 0):
    """SBC of the exact posterior of θ ~ N(0, 1), y_1..5 ~ N(θ, 1): N(Σy / 6, 1/6), its draws pulled
    towards their mean by ``shrink``. Returns (ranks, in 50 %, in 90 %)."""
    rng = np.random.default_rng(seed)
    ranks, in50, in90 = [], [], []
    for _ in range(S):
        theta = rng.normal()
        y = rng.normal(theta, 1.0, size=5)
        draws = rng.normal(y.sum() / 6, np.sqrt(1 / 6), size=L)
        draws = draws.mean() + shrink * (draws - draws.mean())
        ranks.append(sbc.rank_of(theta, draws, rng))
        q = np.quantile(draws, [0.25, 0.75, 0.05, 0.95])
        in50.append(q[0] <= theta <= q[1])
        in90.append(q[2] <= theta <= q[3])
    return np.array(ranks), np.mean(in50), np.mean(in90)


def test_exact_posterior_gives_uniform_ranks_and_nominal_coverage():
    ranks, c50, c90 = _conjugate_ranks(S=400, L=99)
    t = sbc.rank_tests(ranks, 99)
    assert t["bins"] == 20 and t["chi2 p"] > 0.01
    assert abs(t["mean rank"] - 0.5) < 0.05 and abs(t["tails"] - 0.2) < 0.06
    assert abs(c50 - 0.5) < 0.08 and abs(c90 - 0.9) < 0.05


def test_a_shrunk_posterior_fails_the_check():
    """Draws shrunk ×0.3 around their mean: a ∪-shaped histogram, p-value tiny, coverage far below."""
    ranks, c50, c90 = _conjugate_ranks(S=400, L=99, shrink=0.3)
    t = sbc.rank_tests(ranks, 99)
    assert t["chi2 p"] < 1e-10 and t["tails"] > 0.5
    assert c50 < 0.25 and c90 < 0.45


def test_rank_statistics():
    rng = np.random.default_rng(0)
    assert sbc.rank_of(0.5, np.array([0.1, 0.2, 0.9]), rng) == 2
    assert {sbc.rank_of(1.0, np.ones(4), rng) for _ in range(200)} == {0, 1, 2, 3, 4}  # ties at random
    assert sbc.n_bins(100, 99) == 20 and sbc.n_bins(50, 99) == 10 and sbc.n_bins(12, 99) == 2
    lo, hi = sbc.binomial_band(100, 10)
    assert lo < 10 < hi


def test_prior_draws_are_the_models_prior():
    """θ̃ comes from the model's own program: Bradley–Terry's utilities have its prior sd, GPPL's log s
    the mean of its Gamma(2, 2) prior (ψ(2) − log 2)."""
    from scipy.special import digamma

    f, log_s = [], []
    for seed in range(150):
        check = sbc.Check("bradley-terry", "nuts")
        data = sbc.design(check.problem, np.random.default_rng(seed), False)
        _, sites, y = sbc.prior_draw(check.spec.model(check.problem), data, seed)
        f.append(sites["f"].numpy())
        assert set(np.unique(y)) <= {0.0, 1.0} and len(y) == check.problem.n_pairs
        gppl = sbc.Check("gppl", "ep")
        _, sites, _ = sbc.prior_draw(gppl.spec.model(gppl.problem), data, seed)
        log_s.append(float(sites["s"].log()))
    assert abs(np.std(f) - 2.0) < 0.15
    assert abs(np.mean(log_s) - (digamma(2.0) - np.log(2.0))) < 0.2  # 3 standard errors


def test_gppl_ep_calibrated_and_a_shrunk_natgrad_not():
    """GPPL by ep on tiny problems: no summary's ranks far from uniform (Bonferroni over the six);
    natgrad's draws shrunk ×0.3: the check fails, and the 90 % intervals cover far less than 90 %."""
    ep = pd.concat([sbc.Check("gppl", "ep", settings={"n_grid": 9}).run_one(s) for s in range(20)])
    s = sbc.summary_frame(ep)
    assert s["chi2 p"].min() * len(s) > 0.001
    assert 0.75 <= ep["in 90%"].mean() <= 1.0
    shrunk = pd.concat([sbc.Check("gppl", "natgrad", shrink=0.3).run_one(s) for s in range(40)])
    s = sbc.summary_frame(shrunk)
    assert s["chi2 p"].min() < 1e-6 and s["tails"].mean() > 0.45
    assert shrunk["in 90%"].mean() < 0.6


def test_collabgp_labels_are_the_programs():
    """collabGP's program draws labels relative to each pair's (lo, hi): the data built from them give
    back the same labels in the model's setup."""
    check = sbc.Check("collabgp", "ep")
    model = check.spec.model(check.problem)
    d0 = sbc.design(check.problem, np.random.default_rng(3), True)
    _, _, y = sbc.prior_draw(model, d0, 3)
    data = type(d0).from_arrays(d0.a, d0.b, sbc._collab_labels(y, d0), d0.item_features, users=d0.users)
    assert np.array_equal(0.5 * (model.setup(data).t.numpy() + 1.0), y)


def test_crowdgppl_summaries_are_invariant_to_the_components_labels():
    """crowdGPPL's summaries (consensus, personal F = t + VᵀW) do not change when the components are
    permuted and flipped in sign together, so the ranks test the posterior, not the labelling."""
    import torch

    g = torch.Generator().manual_seed(0)
    state = {"t": torch.randn(3, 8, generator=g, dtype=torch.float64),
             "V": torch.randn(3, 2, 8, generator=g, dtype=torch.float64),
             "W": torch.randn(3, 2, 3, generator=g, dtype=torch.float64),
             "s_t": torch.rand(3, dtype=torch.float64) + 0.5}
    flipped = {**state, "V": -state["V"].flip(1), "W": -state["W"].flip(1)}
    q, qf = sbc._crowd_quantities(state), sbc._crowd_quantities(flipped)
    for k in q:
        assert torch.allclose(q[k], qf[k])


def test_a_check_with_other_settings_is_named_apart():
    df = sbc.Check("gppl", "natgrad", settings={"likelihood": "exact"}, label="natgrad (exact)").run_one(0)
    assert set(df["route"]) == {"natgrad (exact)"} and "natgrad (exact)" in sbc.summarise(df)


def test_cli_compare_sbc(tmp_path, capsys):
    out = tmp_path / "sbc.md"
    assert main(["compare", "sbc", "crowdgppl", "--route", "natgrad", "--sims", "3", "--draws", "19",
                 "--out", str(out)]) == 0
    page = out.read_text()
    assert page.startswith("Made by `crowdzoo compare sbc crowdgppl --route natgrad --sims 3 --draws 19")
    for path in (out.with_suffix(".csv"), out.with_suffix(".png")):
        assert path.exists()
    df = pd.read_csv(out.with_suffix(".csv"))
    assert len(df) == 3 * 7 and df["rank"].between(0, 19).all()
    rows = [line for line in page.splitlines() if line.startswith("|")]
    for line in rows:  # every row of a table has its header's cells (an escaped | stays in its cell)
        assert line.replace("\\|", "").count("|") in (16, 8)
    assert REGISTRY["sbc"] is sbc


def test_cli_sbc_options_refused_elsewhere(capsys):
    assert main(["compare", "ties", "--route", "ep"]) == 2
    assert main(["compare", "sbc", "bradley-terry", "--route", "map"]) == 2
    assert main(["compare", "sbc", "scdc"]) == 2
    assert "sbc" in capsys.readouterr().err


@pytest.mark.slow
def test_gppl_nuts_calibrated():
    df = pd.concat([sbc.Check("gppl", "nuts").run_one(s, quick=True) for s in range(20)])
    s = sbc.summary_frame(df)
    assert s["chi2 p"].min() * len(s) > 0.001


def test_dpm_prior_draws_are_the_dirichlet_process():
    """DPM's prior draws (the truncated program's sticks and utilities, memberships and labels drawn
    beside it) have the Dirichlet process's partition of three users: two users together with
    probability 1/(1 + λ) and 1 + 1/2 + 1/3 communities on average for λ = 1 (the Chinese restaurant
    process; the truncation at 10 leaves ½⁹ of the mass), each user's utility the GP's sd (k(x, x) /
    s = 1), and labels that follow the utilities."""
    check = sbc.Check("dpm", "gibbs")
    model = check.spec.model(check.problem)
    together, k, f0, agree = [], [], [], []
    for seed in range(400):
        data = sbc.design(check.problem, np.random.default_rng(seed), True)
        state, y = check.spec.simulate(model, data, seed)
        q = {n: float(v[0]) for n, v in sbc._dpm_quantities(state).items()}
        together.append(q["users 0, 1 together"])
        k.append(q["communities"])
        f0.append(q["f[0], user 0"])
        f = state["f"][0].numpy()[data.users]  # each label's user's utilities
        d = f[np.arange(len(y)), data.a] - f[np.arange(len(y)), data.b]
        agree.append(np.mean((d > 0) == (y == 1)))
    se = np.sqrt(0.25 / 400)
    assert abs(np.mean(together) - 0.5) < 4 * se
    assert abs(np.mean(k) - (1 + 1 / 2 + 1 / 3)) < 4 * np.std(k) / 20
    assert abs(np.std(f0) - 1.0) < 0.1
    assert np.mean(agree) > 0.6  # P(y = 1) = Φ(f_a − f_b): labels lean to the larger utility


def test_dpm_summaries_are_invariant_to_the_communities_labels():
    import torch

    g = torch.Generator().manual_seed(1)
    f = torch.randn(2, 4, 8, generator=g, dtype=torch.float64)
    z = torch.tensor([[0, 0, 2, 1], [3, 1, 1, 0]])
    relabelled = torch.tensor([4, 3, 0, 1, 2])[z]  # the same partitions under other labels
    q, qr = sbc._dpm_quantities({"f": f, "z": z}), sbc._dpm_quantities({"f": f, "z": relabelled})
    for name in q:
        assert torch.equal(q[name], qr[name]), name
    assert q["communities"].tolist() == [3.0, 3.0] and q["users 0, 1 together"].tolist() == [1.0, 0.0]


@pytest.mark.slow
def test_dpm_gibbs_is_calibrated():
    """DPM's Gibbs route (the untruncated CRP, EP per community) on 30 tiny crowds: no summary's
    ranks far from uniform (Bonferroni over the seven) and the 90 % intervals of the utilities cover
    about 90 % (a 0/1 summary's central interval is most often [0, 1], so only its ranks judge it)."""
    df = pd.concat([sbc.Check("dpm", "gibbs").run_one(s, quick=True) for s in range(30)])
    s = sbc.summary_frame(df)
    assert s["chi2 p"].min() * len(s) > 0.001, s[["quantity", "chi2 p", "mean rank", "tails"]]
    assert 0.8 <= df.loc[df["group"].str.startswith("personal"), "in 90%"].mean() <= 0.98


def test_dpm_labels_are_drawn_from_the_programs_likelihood():
    """The labels drawn beside DPM's program follow the program's own likelihood: with the prior
    draw's sticks and utilities, the program's factor on those labels is log Σ_c π_c Π_p Φ(±G_p·u_c)
    per user, computed here with scipy from the drawn values."""
    import pyro
    import torch
    from scipy.special import logsumexp
    from scipy.stats import norm

    check = sbc.Check("dpm", "gibbs")
    model = check.spec.model(check.problem)
    data0 = sbc.design(check.problem, np.random.default_rng(7), True)
    _, y = check.spec.simulate(model, data0, 7)
    data = type(data0).from_arrays(data0.a, data0.b, y, data0.item_features, users=data0.users)
    fn, args = model.program(model.setup(data, seed=7), data, None)
    tr = pyro.poutine.trace(fn).get_trace(*args)
    beta, u = tr.nodes["beta"]["value"].numpy(), tr.nodes["u"]["value"].numpy()
    pi = np.append(beta, 1.0) * np.concatenate([[1.0], np.cumprod(1 - beta)])
    z = args[0].numpy() @ u.T  # (P, T)
    ll = norm.logcdf(np.where(y[:, None] == 1, z, -z))
    per_user = [logsumexp(np.log(pi) + ll[data.users == k].sum(0)) for k in range(data.n_users)]
    factor = tr.nodes["labels"]["fn"].log_prob(torch.zeros(())).sum().item()
    np.testing.assert_allclose(factor, np.sum(per_user), rtol=1e-9)
