"""compare_posteriors: its distances against independent formulas, and on real fits: NUTS agrees with a
second NUTS run of another seed, and a copy of NUTS whose latent sds are halved fails the agreement check
(per group); a reference fitted to other data is refused by the data's checksums."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import xarray as xr
from arviz_base import from_dict
from scipy.stats import wasserstein_distance

import crowdzoo as cz
from crowdzoo.diagnostics import checks as ck
from crowdzoo.diagnostics.compare import compare_draws, gaussian_kl, wasserstein

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny matrices: one torch thread


def test_wasserstein_matches_scipy_and_sorted_differences():
    rng = np.random.default_rng(0)
    x, r = rng.normal(0.3, 1.2, size=(300, 4)), rng.gamma(2.0, size=(170, 4))  # unequal sizes
    w1, w2 = wasserstein(x, r)
    assert np.allclose(w1, [wasserstein_distance(x[:, k], r[:, k]) for k in range(4)], rtol=1e-10)
    same = rng.normal(size=(300, 4))  # equal sizes: W2² is the mean squared difference of sorted draws
    assert np.allclose(wasserstein(x, same)[1], np.sqrt(((np.sort(x, 0) - np.sort(same, 0)) ** 2).mean(0)))
    assert np.all(w2 >= w1 - 1e-12)  # W2 ≥ W1 (Jensen)


def test_gaussian_kl_matches_torch_and_coverage_is_nominal_for_one_distribution():
    m_x, s_x, m_r, s_r = np.array([0.0, 1.0, -2.0]), np.array([1.0, 0.5, 3.0]), np.array([0.5, 1.0, 0.0]), \
        np.array([2.0, 1.0, 1.0])
    N = torch.distributions.Normal
    want = torch.distributions.kl_divergence(N(torch.tensor(m_x), torch.tensor(s_x)),
                                             N(torch.tensor(m_r), torch.tensor(s_r))).numpy()
    assert np.allclose(gaussian_kl(m_x, s_x, m_r, s_r), want, rtol=1e-12)
    assert np.isnan(gaussian_kl(np.zeros(1), np.zeros(1), np.zeros(1), np.ones(1))).all()  # a point mass
    rng = np.random.default_rng(1)
    g = compare_draws(rng.normal(size=(4000, 50)), rng.normal(size=(4000, 50)))
    assert g["cover50"].mean() == pytest.approx(0.5, abs=0.01)
    assert g["cover90"].mean() == pytest.approx(0.9, abs=0.01)
    assert np.median(g["ratio"]) == pytest.approx(1.0, abs=0.02) and g["kl"].mean() < 0.01
    half = compare_draws(0.5 * rng.normal(size=(4000, 50)), rng.normal(size=(4000, 50)))
    # W2 of N(0, ¼) against N(0, 1) is |σ_x − σ_r| = ½; KL = log 2 + ¼/2 − ½
    assert half["w2"].mean() == pytest.approx(0.5, abs=0.03)
    assert half["kl"].mean() == pytest.approx(np.log(2) + 0.125 - 0.5, abs=0.02)


@pytest.fixture(scope="module")
def nuts_pair():
    """Two NUTS runs (seeds 0 and 1) of Bradley–Terry on 60 labels of 6 items (a few seconds each)."""
    data, _ = cz.simulate_gppl(n_items=6, n_pairs=60, n_features=1, seed=2)
    kw = dict(method="nuts", num_samples=100, warmup_steps=100, num_chains=2)
    return data, *(cz.fit(cz.BradleyTerry(), data, seed=seed, **kw) for seed in (0, 1))


def _shrunk(dt, factor):
    """A copy of the tree whose posterior draws are pulled towards their means by ``factor``,
    marked as an approximation."""
    out = dt.copy(deep=True)
    post = dt.posterior.to_dataset()
    mean = post.mean(("chain", "draw"))
    out["posterior"] = xr.DataTree((mean + factor * (post - mean)).transpose("chain", "draw", ...))
    out.attrs.update(approximate=1, inference="svi")
    return out


def test_a_second_nuts_run_agrees_and_half_the_sds_fails(nuts_pair, tmp_path):
    data, nuts0, nuts1 = nuts_pair
    table = cz.compare_posteriors(nuts1, nuts0)
    assert list(table.index) == ["log-likelihood", "f"]
    assert list(table.columns) == ["elements", "identified", "mean_error", "sd_ratio", "w1", "w2", "kl",
                                   "cover50", "cover90"]
    assert table.loc["f", "elements"] == data.n_items and table.loc["f", "identified"]
    assert (table["mean_error"] < 0.25).all() and table["sd_ratio"].between(0.8, 1.25).all()
    assert table["cover90"].between(0.8, 0.97).all() and table["cover50"].between(0.35, 0.65).all()
    ref = nuts0.to_arviz()
    agree = ck.agreement(_shrunk(nuts1.to_arviz(), 1.0), ref)
    assert all(c.verdict == "pass" for c in agree), [(c.name, c.value) for c in agree]
    half = _shrunk(nuts1.to_arviz(), 0.5)
    t_half = cz.compare_posteriors(half, ref)
    assert t_half.loc["f", "sd_ratio"] == pytest.approx(0.5, abs=0.1)
    assert t_half.loc["f", "w2"] > table.loc["f", "w2"] and t_half.loc["f", "kl"] > table.loc["f", "kl"]
    verdicts = {c.name: c for c in ck.agreement(half, ref)}
    sds = verdicts["agreement with NUTS: sds"]
    assert sds.verdict == "fail" and not sds.value.endswith("(log-likelihood)"), sds.value
    assert verdicts["agreement with NUTS: 90 % intervals"].verdict != "pass"
    rep = cz.report(half, tmp_path / "half.md", reference=ref)  # the report shows the same table
    assert rep.comparison.equals(t_half) and rep.verdict == "fail"
    assert "| f | 6 | True | " in (tmp_path / "half.md").read_text()


def test_a_reference_of_other_labels_is_refused_by_checksum(nuts_pair, tmp_path):
    data, nuts0, nuts1 = nuts_pair
    a, b, y = data.a.copy(), data.b.copy(), data.y.copy()
    a[0], b[0], y[0] = data.b[0], data.a[0], 1 - data.y[0]  # one label written the other way round
    other = cz.PairwiseData.from_arrays(a, b, y, data.item_features, item_ids=data.item_ids)
    mine, theirs = nuts0.to_arviz(), cz.fit(cz.BradleyTerry(), other, method="map").to_arviz()
    assert mine.attrs["checksum_items"] == theirs.attrs["checksum_items"]
    assert mine.attrs["checksum_labels"] != theirs.attrs["checksum_labels"]
    with pytest.raises(cz.DataError, match="reference: fitted to different data.*labels") as err:
        cz.compare_posteriors(theirs, mine)
    assert err.value.arg == "reference"
    with pytest.raises(cz.DataError, match="labels"):
        cz.report(_shrunk(theirs, 1.0), tmp_path / "r.md", reference=mine)


def test_trees_made_elsewhere_compare_by_their_observed_labels():
    rng = np.random.default_rng(3)

    def tree(y, scale):
        return from_dict({"posterior": {"f": scale * rng.normal(size=(2, 300, 5))},
                          "observed_data": {"y": y}}, dims={"y": ["pair"]})

    y = np.array([1, 0, 1, 1])
    table = cz.compare_posteriors(tree(y, 2.0), tree(y, 1.0))
    assert list(table.index) == ["f"] and table.loc["f", "sd_ratio"] == pytest.approx(2.0, rel=0.1)
    with pytest.raises(cz.DataError, match="observed_data 'y' differs"):
        cz.compare_posteriors(tree(y, 1.0), tree(1 - y, 1.0))
    with pytest.raises(cz.DataError, match="post: expected a crowdzoo posterior or an ArviZ DataTree"):
        cz.compare_posteriors(np.zeros(3), tree(y, 1.0))
