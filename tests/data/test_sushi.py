"""Sushi loader (Kamishima's formats, on a synthetic fixture) and the Table 2 comparison."""
import numpy as np
import pytest

import crowdzoo as cz
from crowdzoo.cli import main
from crowdzoo.data.sushi import SET_A_ITEMS, load_sushi, sample_pairs, write_sushi_fixture


@pytest.fixture(scope="module")
def sushi_dir(tmp_path_factory):
    return write_sushi_fixture(tmp_path_factory.mktemp("sushi"), n_users=120, seed=3)


def test_loader_reads_both_sets(sushi_dir):
    a = load_sushi(sushi_dir, "a")
    assert a.orders.shape == (120, 10) and set(np.unique(a.orders)) == set(SET_A_ITEMS)
    b = load_sushi(sushi_dir, "b")
    assert b.orders.shape == (120, 10) and b.orders.max() < 100
    assert list(b.items.columns[:2]) == ["name", "style"] and len(b.users) == 120


def test_pairs_follow_each_users_ranking(sushi_dir):
    s = load_sushi(sushi_dir, "b")
    train, test, orders = sample_pairs(s, 50, 20, 25, seed=0)
    assert train.n_pairs == 50 * 20 and test.n_pairs == 50 * 25
    rank = {}  # (user, item id) → position in that user's ranking
    for u, row in enumerate(orders):
        for k, item in enumerate(row):
            rank[u, item] = k
    for d in (train, test):
        ia, ib = d.item_ids[d.a], d.item_ids[d.b]
        above = np.array([rank[u, x] < rank[u, z] for u, x, z in zip(d.users, ia, ib, strict=True)])
        np.testing.assert_array_equal(above, d.y == 1)
        assert 0.3 < d.y.mean() < 0.7  # shown in random order
    # no pair of a user is both a training and a test pair
    key = lambda d: {(u, min(x, z), max(x, z)) for u, x, z in zip(d.users, d.a, d.b, strict=True)}  # noqa: E731
    assert not key(train) & key(test)


def test_loader_errors_name_file_line_and_problem(sushi_dir, tmp_path):
    with pytest.raises(cz.DataError, match="sushi3a.5000.10.order not found.*kamishima"):
        load_sushi(tmp_path, "a")
    for name in ("sushi3.idata", "sushi3.udata", "sushi3b.5000.10.order"):
        (tmp_path / name).write_bytes((sushi_dir / name).read_bytes())
    path = tmp_path / "sushi3b.5000.10.order"
    lines = path.read_text().splitlines()
    lines[3] = "0 10 1 2 3 4 5 6 7 8 9 100"
    path.write_text("\n".join(lines))
    with pytest.raises(cz.DataError, match=r"line 4: item id 100 is outside 0\.\.99"):
        load_sushi(tmp_path, "b")
    lines[3] = "0 10 1 2 3"
    path.write_text("\n".join(lines))
    with pytest.raises(cz.DataError, match="line 4: expected '0 10' and 10 item ids"):
        load_sushi(tmp_path, "b")
    lines[3] = "0 10 1 1 3 4 5 6 7 8 9 10"
    path.write_text("\n".join(lines))
    with pytest.raises(cz.DataError, match="line 4: an item appears twice"):
        load_sushi(tmp_path, "b")


def test_sushi_comparison_on_the_fixture(sushi_dir, tmp_path, capsys):
    """The fixture's users split into two camps (east/west) with opposite tastes: personal
    models must beat GPPL pooled over users, as in Table 2; output has the paper's numbers."""
    out = tmp_path / "sushi-a.md"
    assert main(["compare", "sushi-a", "--quick", "--data-dir", str(sushi_dir), "--out", str(out)]) == 0
    text = out.read_text()
    assert "| crowdGPPL |" in text and "0.84" in text and "collabGP" in text
    import pandas as pd

    df = pd.read_csv(out.with_suffix(".csv"))
    acc = df[df.metric == "acc"].set_index("method")["value"]
    assert acc["crowdGPPL (exact natgrad)"] > acc["GPPL"] + 0.05
    assert acc["GPPL-per-user"] > acc["GPPL"]
    assert acc["collabGP\\u"] > acc["GPPL"]  # collabGP: pairwise predictions, no utilities, no τ
    assert not ((df.method == "collabGP") & (df.metric == "tau")).any()
    assert out.with_suffix(".png").exists()
    assert main(["compare", "sushi-b", "--quick"]) == 2
    assert "sushi-b: --data-dir is required" in capsys.readouterr().err
