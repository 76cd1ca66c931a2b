"""Predictions at scale: pairs scored through their items' rows (O(M) a pair) give the same numbers as
each pair's own rows (O(M²) a pair), for a sparse and an exact GPP, training and new items."""
import numpy as np
import pytest
import torch

import crowdzoo as cz
from crowdzoo.gp.probit import mixture_prob


def _per_pair(post, a, b, X=None):
    dA, c = post.setup.pair_rows(torch.as_tensor(a), torch.as_tensor(b), X)
    mu = post.means @ dA.T
    var = c[None, :] / post.s[:, None]
    if post.covs is not None:
        var = var + torch.einsum("pm,gmn,pn->gp", dA, post.covs, dA)
    return mixture_prob(post.weights, mu, var).numpy()


@pytest.mark.parametrize("n_inducing", [8, None])
def test_pairs_through_item_rows_equal_each_pairs_own_rows(n_inducing):
    data, _ = cz.simulate_gppl(n_items=25, n_pairs=200, n_features=2, seed=1)
    post = cz.fit(cz.GPPL(n_inducing=n_inducing), data, method="ep")
    rng = np.random.default_rng(0)
    a = rng.integers(0, 25, 300)
    b = (a + rng.integers(1, 25, 300)) % 25
    ids = data.item_ids
    got = post.predict_proba(ids[a], ids[b])
    np.testing.assert_allclose(got, _per_pair(post, a, b), rtol=0, atol=1e-12)
    X_new = rng.uniform(-1, 1, (12, 2))
    a2, b2 = a[:50] % 12, (a[:50] % 12 + 1 + b[:50] % 11) % 12
    got_new = post.predict_proba(a2, b2, item_features=X_new)
    np.testing.assert_allclose(got_new, _per_pair(post, a2, b2, torch.as_tensor(X_new, dtype=torch.float64)),
                               rtol=0, atol=1e-12)
    assert np.abs(got - 0.5).max() > 0.05  # the posterior says something


@pytest.mark.parametrize("kw", [dict(n_inducing=10, n_inducing_users=4),
                                dict(n_inducing=None, n_inducing_users=None)])
def test_crowd_pairs_through_item_and_user_rows_equal_each_pairs_own_rows(kw):
    data, _ = cz.simulate_crowd(n_items=20, n_users=8, n_pairs=300, n_components=2, seed=2)
    post = cz.fit(cz.CrowdGPPL(n_components=3, **kw), data, max_iter=40, progress_bar=False)
    rng = np.random.default_rng(1)
    a = torch.as_tensor(rng.integers(0, 20, 200))
    b = (a + torch.as_tensor(rng.integers(1, 20, 200))) % 20
    j = torch.as_tensor(rng.integers(0, 8, 200))
    for users in (None, j):
        fast = post._predict_by_items(a, b, None, None, users)
        slow = post._predict_by_pairs(a, b, None, None, users)
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)
    X_new = torch.as_tensor(rng.uniform(0, 10, (6, 2)))
    a2, b2 = a[:30] % 6, (a[:30] % 6 + 1) % 6
    np.testing.assert_allclose(post._predict_by_items(a2, b2, X_new, None, j[:30]),
                               post._predict_by_pairs(a2, b2, X_new, None, j[:30]), rtol=0, atol=1e-12)


def test_cli_refuses_to_write_over_what_is_not_its_own(tmp_path, capsys):
    """fit into a folder of other files, predict onto an existing file: both need --overwrite; a
    ';'-separated file read with ',' gets told to set --sep."""
    from crowdzoo.cli import main

    data, _ = cz.simulate_gppl(n_items=8, n_pairs=60, seed=0)
    frame = data.to_frame()
    frame.to_csv(tmp_path / "pairs.csv", index=False)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    args = ["fit", "gppl", "--pairs", str(tmp_path / "pairs.csv"), "--max-iter", "5", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "mine")]) == 2
    assert "not a run (it holds notes.txt)" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    out = tmp_path / "p.csv"
    out.write_text("precious\n")
    predict = ["predict", str(tmp_path / "run"), "--pairs", str(tmp_path / "pairs.csv"), "-o", str(out)]
    assert main(predict) == 2
    assert "exists" in capsys.readouterr().err and out.read_text() == "precious\n"
    assert main([*predict, "--overwrite"]) == 0
    frame.to_csv(tmp_path / "semi.csv", index=False, sep=";")
    assert main(["predict", str(tmp_path / "run"), "--pairs", str(tmp_path / "semi.csv")]) == 2
    assert "set --sep ';'" in capsys.readouterr().err


def test_auto_inducing_bounds_the_work_of_a_pass():
    """``n_inducing="auto"``: every item up to 500, then 500; with many labels M = √(budget / (P (C + 1)))
    so that P (C + 1) M² stays at the budget (M = 200 for C = 20 at 10⁶ labels), never below 100."""
    from crowdzoo.gp.inducing import AUTO_INDUCING, MIN_AUTO_INDUCING, PASS_BUDGET, auto_inducing

    assert auto_inducing(300) is None and auto_inducing(150, 1e6 * 21) is None
    assert auto_inducing(300, 1e6 * 21) == 200
    assert auto_inducing(3000) == AUTO_INDUCING == auto_inducing(3000, 1e4 * 21)
    for P in (3e5, 1e6, 2e6):
        M = auto_inducing(3000, P * 21)
        assert M * M * P * 21 <= PASS_BUDGET < (M + 1) ** 2 * P * 21
    assert auto_inducing(3000, 1e6 * 21) == 200
    assert auto_inducing(3000, 1e9) == MIN_AUTO_INDUCING


def test_crowdgppl_auto_inducing_reads_every_ranks_labels(monkeypatch):
    """crowdGPPL's setup sizes "auto" by the labels and its factors, and a rank holding a shard of the
    labels sizes it by all of them (every rank must build the same inducing set)."""
    import dataclasses

    from crowdzoo.gp import inducing

    data, _ = cz.simulate_crowd(n_items=40, n_users=6, n_pairs=180, seed=0)
    model = cz.CrowdGPPL(n_components=3)
    # a budget that makes 180 labels "many": M = √(budget / (180 · 4)) = 20
    monkeypatch.setattr(inducing, "PASS_BUDGET", 180 * 4 * 20 ** 2)
    monkeypatch.setattr(inducing, "MIN_AUTO_INDUCING", 1)
    assert len(data.a) == 180
    assert model.setup(data).items.M == 20
    shard = dataclasses.replace(data.subset(np.arange(90)), label_range=(0, 90, 180))
    assert model.setup(shard).items.M == 20
    assert model.setup(data.subset(np.arange(90))).items.M == 28  # √(288000 / 360)
