"""PairwiseData: construction, labelled round trips, validation messages, splits, simulator."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crowdzoo as cz
from crowdzoo import DataError, PairwiseData

X = np.arange(12.0).reshape(6, 2)


def test_round_trip_keeps_ids_and_copies_input():
    a, b, y = np.array([0, 1, 2]), np.array([3, 4, 5]), np.array([1, 0, 1])
    frozen = (a.copy(), b.copy(), y.copy(), X.copy())
    data = PairwiseData.from_arrays(a, b, y, X, item_ids=list("uvwxyz"))
    df = data.to_frame()
    assert list(df.columns) == ["a", "b", "y"]
    assert df["a"].tolist() == ["u", "v", "w"] and df["b"].tolist() == ["x", "y", "z"]
    for before, now in zip(frozen, (a, b, y, X)):
        np.testing.assert_array_equal(before, now)
    a[0] = 5  # mutating the caller's array afterwards leaves the data alone
    assert data.a[0] == 0


def test_from_frame_named_columns_and_users():
    items = pd.DataFrame({"len": [1.0, 2.0, 3.0], "price": [3.0, 1.0, 2.0]},
                         index=pd.Index(["tuna", "egg", "eel"], name="sushi"))
    df = pd.DataFrame({"worker": ["w1", "w2", "w1"], "winner": ["tuna", "egg", "eel"],
                       "loser": ["egg", "eel", "tuna"], "label": [1, 0, 1]})
    df_copy, items_copy = df.copy(), items.copy()
    data = PairwiseData.from_frame(df, items, a="winner", b="loser", y="label", user="worker")
    pd.testing.assert_frame_equal(df, df_copy)
    pd.testing.assert_frame_equal(items, items_copy)
    back = data.to_frame()
    assert back["user"].tolist() == ["w1", "w2", "w1"]
    assert back["a"].tolist() == ["tuna", "egg", "eel"]
    assert data.n_users == 2


def test_from_frame_missing_id_and_ties():
    items = pd.DataFrame({"x": [0.0, 1.0]}, index=["p", "q"])
    df = pd.DataFrame({"a": ["p", "q", "r"], "b": ["q", "p", "p"], "y": [1, 0.5, 1]})
    with pytest.raises(DataError, match=r"column 'a', row 2 \(index 2\): item id 'r' not found"):
        PairwiseData.from_frame(df.assign(y=[1, 0, 1]), items)
    with pytest.raises(DataError, match=r"column 'y', row 1 \(index 1\): label 0.5 is a tie.*ties='drop'"):
        PairwiseData.from_frame(df.iloc[:2], items)
    data = PairwiseData.from_frame(df.iloc[:2], items, ties="drop")
    assert data.n_pairs == 1
    with pytest.raises(DataError, match="column 'winner' not found"):
        PairwiseData.from_frame(df, items, a="winner")


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(a=[0, 9]), r"a: row 1: index 9 is out of range \[0, 6\)"),
    (dict(b=[0, -1]), r"b: row 1: index -1 is out of range"),
    (dict(a=[0, 2], b=[1, 2]), r"a, b: row 1: a == b == 2"),
    (dict(y=[1, 2]), r"y: row 1: label 2 is outside \{0, 1\}"),
    (dict(y=[1]), r"mismatched lengths"),
    (dict(a=[], b=[], y=[]), r"empty data"),
    (dict(a=[0, 1.5]), r"a: row 1: 1.5 is not an integer index"),
])
def test_label_validation(kwargs, pattern):
    args = {"a": [0, 1], "b": [1, 2], "y": [1, 0], "item_features": X, **kwargs}
    with pytest.raises(DataError, match=pattern):
        PairwiseData.from_arrays(**args)


@pytest.mark.parametrize("value, pattern", [
    (np.nan, r"item_features: row 2, column 1: value nan is not finite"),
    (np.inf, r"item_features: row 2, column 1: value inf is not finite"),
])
def test_feature_validation(value, pattern):
    bad = X.copy()
    bad[2, 1] = value
    with pytest.raises(DataError, match=pattern):
        PairwiseData.from_arrays([0], [1], [1], bad)


def test_non_numeric_features():
    obj = X.astype(object)
    obj[4, 0] = "big"
    with pytest.raises(DataError, match=r"item_features: row 4, column 0: 'big' is not numeric"):
        PairwiseData.from_arrays([0], [1], [1], obj)
    frame = pd.DataFrame({"size": [1.0, 2.0], "colour": ["red", "blue"]})
    with pytest.raises(DataError, match=r"column 1 \('colour'\) is not numeric \(row 0: 'red'\)"):
        PairwiseData.from_arrays([0], [1], [1], frame)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 5), st.booleans()), min_size=1, max_size=40))
def test_any_valid_labels_round_trip(rows):
    a = np.array([r[0] for r in rows])
    b = (a + np.array([r[1] for r in rows])) % 6
    y = np.array([int(r[2]) for r in rows])
    data = PairwiseData.from_arrays(a, b, y, X)
    df = data.to_frame()
    np.testing.assert_array_equal(df["a"], a)
    np.testing.assert_array_equal(df["b"], b)
    np.testing.assert_array_equal(df["y"], y)


def test_splits():
    data, _ = cz.simulate_gppl(n_items=10, n_pairs=100, seed=0)
    train, test = cz.split_pairs(data, 0.3, seed=1)
    assert train.n_pairs == 70 and test.n_pairs == 30
    users = np.repeat(np.arange(10), 10)
    crowd = PairwiseData.from_arrays(data.a, data.b, data.y, data.item_features, users=users)
    tr, te = cz.split_users(crowd, 0.2, seed=0)
    assert not set(tr.users) & set(te.users)
    assert tr.n_pairs + te.n_pairs == 100
    with pytest.raises(DataError, match="test_fraction"):
        cz.split_pairs(data, 1.5)


def test_simulator_is_seeded_and_follows_utilities():
    d1, f1 = cz.simulate_gppl(n_items=20, n_pairs=300, s=0.1, seed=7)
    d2, f2 = cz.simulate_gppl(n_items=20, n_pairs=300, s=0.1, seed=7)
    np.testing.assert_array_equal(f1, f2)
    np.testing.assert_array_equal(d1.y, d2.y)
    agree = ((f1[d1.a] > f1[d1.b]) == (d1.y == 1)).mean()
    assert agree > 0.8
