"""The diagnostic report of a DPM community fit: it runs (HTML and Markdown) and shows the
co-clustering heat map, with the users ordered by the point partition; a posterior without
``coclustering()`` gets no such figure."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

import crowdzoo as cz
from crowdzoo.data.simulate_dpm import simulate_communities
from crowdzoo.diagnostics import plots

CAPTION = "Co-clustering"


@contextlib.contextmanager
def _one_thread():
    """One torch thread: these fits are many tiny operations, far slower on a thread pool when the
    cores are busy (the Gibbs fit below, measured under load: 0.9 s on one thread, 147 s on two)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def gibbs():
    data, truth = simulate_communities(n_users=12, n_items=12, n_labels=10, n_communities=2, seed=1)
    model = cz.DPMCommunities(kernel="se", lengthscale=[0.3, 0.3], shape_s0=1.0, rate_s0=4.0)
    # 2 chains × 20 kept sweeps: PSIS-LOO needs enough draws for its tail fit
    with _one_thread():
        post = cz.fit(model, data, method="gibbs", n_sweeps=30, burn_in=10, n_chains=2, seed=0,
                      progress_bar=False)
    return post, data, truth


def _co_figures(rep):
    return [cap for cap in rep.figures if cap.startswith(CAPTION)]


def test_simulator_is_seeded_and_deals_users_round_robin():
    d1, t1 = simulate_communities(n_users=9, n_items=8, n_labels=5, n_communities=3, seed=4)
    d2, t2 = simulate_communities(n_users=9, n_items=8, n_labels=5, n_communities=3, seed=4)
    assert d1.n_pairs == 45 and d1.n_users == 9 and d1.n_items == 8
    assert np.array_equal(d1.y, d2.y) and np.array_equal(t1["f"], t2["f"])
    assert list(t1["communities"]) == [0, 1, 2] * 3 and t1["f"].shape == (3, 8)
    assert d1.user_ids[0] == "user00" and d1.item_ids[-1] == "item07"


def test_html_report_of_a_gibbs_fit_has_the_coclustering_heat_map(gibbs, tmp_path):
    post, data, _ = gibbs
    rep = cz.report(post, tmp_path / "dpm.html")
    (cap,) = _co_figures(rep)
    png = rep.figures[cap]
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert "point partition" in cap
    html = (tmp_path / "dpm.html").read_text()
    assert cap in html and html.count("data:image/png;base64,") == len(rep.figures)
    assert {c.name for c in rep.checks} >= {"PSIS-LOO", "calibration (training labels)"}


def test_markdown_report_of_a_gibbs_fit_writes_the_coclustering_image(gibbs, tmp_path):
    post, _, _ = gibbs
    rep = cz.report(post, tmp_path / "dpm.md")
    (cap,) = _co_figures(rep)
    i = list(rep.figures).index(cap)
    md = (tmp_path / "dpm.md").read_text()
    assert f"![{cap}](dpm_files/figure{i + 1}.png)" in md
    assert (tmp_path / "dpm_files" / f"figure{i + 1}.png").read_bytes() == rep.figures[cap]


def test_a_report_without_coclustering_has_no_heat_map(tmp_path):
    data, _ = cz.simulate_gppl(n_items=10, n_pairs=80, seed=0)
    with _one_thread():
        post = cz.fit(cz.GPPL(), data, method="ep")
    assert not hasattr(post, "coclustering")
    rep = cz.report(post, tmp_path / "gppl.html")
    assert rep.figures and not _co_figures(rep)
    assert CAPTION not in (tmp_path / "gppl.html").read_text()


def test_users_are_ordered_by_the_point_partition_so_blocks_show():
    z = np.array([1, 0, 1, 0, 2, 1])  # community 1 is the largest: it comes first
    P = (z[:, None] == z[None, :]).astype(float)
    P[0, 2] = P[2, 0] = 0.6  # user 5 is community 1's most typical member, then 0 and 2
    order = plots.coclustering_order(P, z)
    assert list(z[order]) == [1, 1, 1, 0, 0, 2]
    assert order[0] == 5
    # no partition: a greedy chain of the most co-clustered users still keeps the blocks together
    greedy = plots.coclustering_order(P)
    assert sorted(greedy) == list(range(6))
    assert all(np.ptp(np.flatnonzero(z[greedy] == c)) == np.sum(z == c) - 1 for c in range(3))
    assert plots.coclustering(P, z, user_ids=[f"u{i}" for i in range(6)])[:4] == b"\x89PNG"


def test_gibbs_chains_get_rhat_and_a_short_run_skips_psis_loo(tmp_path):
    """Gibbs draws are Markov chains on the posterior: r̂/ESS are computed (on label-invariant
    quantities), not skipped as for an approximation; a run too short for PSIS's Pareto fit gets a
    skip with the reason instead of a crash."""
    import torch

    from crowdzoo.data.simulate_dpm import simulate_communities

    torch.set_num_threads(1)
    data, _ = simulate_communities(seed=0)
    post = cz.fit(cz.DPMCommunities(), data, n_sweeps=12, burn_in=2, n_chains=2, progress_bar=False)
    checks = {c.name: c for c in cz.report(post, tmp_path / "r.md").checks}
    assert checks["r̂"].verdict != "skip" and checks["ESS (bulk, tail)"].verdict != "skip"
    assert checks["PSIS-LOO"].verdict == "skip" and "draws" in checks["PSIS-LOO"].detail
