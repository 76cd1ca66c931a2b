"""Label weights in the data: ``PairwiseData.weights`` from arrays, a weight column and counts per pair
(``from_counts``), ties written as two halves of weight ½, the errors for bad weights and counts (by
column, row and value), and the views and readers that carry weights (subset, to_frame, splits, a
shard of a CSV)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crowdzoo import DataError, PairwiseData
from crowdzoo.data.split import split_pairs

COUNTS = pd.DataFrame({"a": ["x", "y", "x"], "b": ["y", "z", "z"], "wins": [10, 0, 2], "losses": [0, 3, 1],
                       "ties": [10, 1, 0]}, index=[7, 8, 9])


def _labels(data):
    """{(a, b, y): total weight} over the labels, in the caller's ids."""
    out = {}
    for a, b, y, w in zip(data.item_ids[data.a], data.item_ids[data.b], data.y, data.label_weights):
        out[(a, b, float(y))] = out.get((a, b, float(y)), 0.0) + float(w)
    return out


def test_weights_from_arrays_are_checked_and_ones_are_none():
    X = np.zeros((3, 0))
    data = PairwiseData.from_arrays([0, 1], [1, 2], [1, 0], X, weights=[2, 0.5])
    assert data.weights.tolist() == [2.0, 0.5] and data.label_weights.dtype == np.float64
    assert PairwiseData.from_arrays([0, 1], [1, 2], [1, 0], X, weights=[1, 1]).weights is None
    assert PairwiseData.from_arrays([0, 1], [1, 2], [1, 0], X).label_weights.tolist() == [1.0, 1.0]
    for bad, value in (([1, -1], "-1"), ([1, 0], "0"), ([1, np.nan], "nan"), ([1, "a"], "'a'")):
        with pytest.raises(DataError, match=rf"weights: row 1: weight {value} is not a number > 0") as err:
            PairwiseData.from_arrays([0, 1], [1, 2], [1, 0], X, weights=bad)
        assert err.value.arg == "weights" and err.value.row == 1
    with pytest.raises(DataError, match=r"weights: expected a 1-D array of one weight per label \(2\)"):
        PairwiseData.from_arrays([0, 1], [1, 2], [1, 0], X, weights=[1, 2, 3])


def test_a_weight_column_and_its_errors_name_the_column_and_row():
    df = pd.DataFrame({"a": ["x", "y"], "b": ["y", "z"], "y": [1, 0], "w": [2.5, 1]}, index=[10, 11])
    data = PairwiseData.from_frame(df, weight="w")
    assert data.weights.tolist() == [2.5, 1.0] and repr(data).startswith("PairwiseData(pairs=2, weight=3.5,")
    for bad, shown in ((["2", None], "missing weight"), ([1, -2], "-2 is not a weight"),
                       ([1, 0], "0 is not a"), ([1, "heavy"], "'heavy' is not a weight")):
        with pytest.raises(DataError, match=rf"column 'w', row 1 \(index 11\): {shown}") as err:
            PairwiseData.from_frame(df.assign(w=bad), weight="w")
        assert err.value.arg == "weight" and err.value.row == 1
    with pytest.raises(DataError, match="weight: column 'mass' not found"):
        PairwiseData.from_frame(df, weight="mass")
    assert df["w"].tolist() == [2.5, 1]  # the caller's frame is not changed


def test_ties_half_are_two_labels_of_half_the_row_weight():
    df = pd.DataFrame({"a": ["x", "y"], "b": ["y", "z"], "y": [1, 0.5], "w": [2, 3]})
    data = PairwiseData.from_frame(df, ties="half", weight="w")
    assert data.weights.tolist() == [2.0, 1.5, 1.5] and data.tie_halves.tolist() == [False, True, True]
    assert data.source_rows.tolist() == [0, 1, 1]
    plain = PairwiseData.from_frame(df.drop(columns="w"), ties="half")
    assert plain.weights.tolist() == [1.0, 0.5, 0.5]
    assert PairwiseData.from_frame(df.iloc[:1]).weights is None  # no weights, no ties: None


def test_counts_become_weighted_labels_in_the_rows_own_order():
    half = PairwiseData.from_counts(COUNTS, tied="ties", ties="half")
    assert _labels(half) == {("x", "y", 1.0): 15.0, ("y", "x", 1.0): 5.0, ("y", "z", 0.0): 3.0,
                             ("y", "z", 1.0): 0.5, ("z", "y", 1.0): 0.5, ("x", "z", 1.0): 2.0,
                             ("x", "z", 0.0): 1.0}
    assert half.source_rows.tolist() == [0, 0, 0, 1, 1, 1, 2, 2]
    assert half.tie_halves.tolist() == [False, True, True, False, True, True, False, False]
    model = PairwiseData.from_counts(COUNTS, tied="ties", ties="model")
    assert model.has_ties and model.tie_halves is None
    assert model.y.tolist() == [1, 0.5, 0, 0.5, 1, 0] and model.weights.tolist() == [10, 10, 3, 1, 2, 1]
    dropped = PairwiseData.from_counts(COUNTS, tied="ties", ties="drop")
    assert dropped.n_pairs == 4 and not dropped.has_ties
    # a row of ties alone is left out under "drop", with its items
    only_ties = COUNTS.assign(wins=[10, 0, 0], losses=[0, 0, 0], ties=[0, 2, 4])
    kept = PairwiseData.from_counts(only_ties, tied="ties", ties="drop")
    assert kept.source_rows.tolist() == [0] and list(kept.item_ids) == ["x", "y"]
    assert COUNTS["wins"].tolist() == [10, 0, 2]  # the caller's frame is not changed


def test_counts_equal_the_rows_they_stand_for():
    """A frame of counts and the frame with one row per label (its ties as y = 0.5) give the same labels,
    users and weights (summed by outcome), for every rule of ties."""
    df = COUNTS.assign(rater=["u1", "u2", "u1"])
    rows = []
    for _, r in df.iterrows():
        rows += [(r.a, r.b, 1.0, r.rater)] * r.wins + [(r.a, r.b, 0.0, r.rater)] * r.losses
        rows += [(r.a, r.b, 0.5, r.rater)] * r.ties
    long = pd.DataFrame(rows, columns=["a", "b", "y", "rater"])
    for ties in ("half", "model", "drop"):
        counts = PairwiseData.from_counts(df, tied="ties", ties=ties, user="rater")
        one_by_one = PairwiseData.from_frame(long, ties=ties, user="rater")
        assert _labels(counts) == _labels(one_by_one)
        assert list(counts.user_ids) == list(one_by_one.user_ids) and list(counts.item_ids) == list(
            one_by_one.item_ids)
        by_user = lambda d: np.bincount(d.users, d.label_weights).tolist()  # noqa: E731
        assert by_user(counts) == by_user(one_by_one)


@pytest.mark.parametrize("bad, shown", [(1.5, "1.5 is not a count"), (-1, "-1 is not a count"),
                                        (None, "missing count"), ("many", "'many' is not a count")])
def test_bad_counts_are_refused_by_column_and_row(bad, shown):
    df = COUNTS.assign(losses=COUNTS["losses"].astype(object))
    df.iloc[1, df.columns.get_loc("losses")] = bad
    with pytest.raises(DataError, match=rf"column 'losses', row 1 \(index 8\): {shown}") as err:
        PairwiseData.from_counts(df, tied="ties", ties="half")
    assert err.value.arg == "losses" and err.value.row == 1


def test_rows_without_labels_ties_and_missing_columns_are_refused():
    with pytest.raises(DataError, match=r"row 1 \(index 8\): every count \('wins', 'losses', 'ties'\) is 0"):
        PairwiseData.from_counts(COUNTS.assign(losses=[0, 0, 1], ties=0), tied="ties", ties="half")
    with pytest.raises(DataError, match=r"row 0 \(index 7\): 10 tie\(s\) in column 'ties' \(2 row\(s\).*"
                                        r"ties='half'") as err:
        PairwiseData.from_counts(COUNTS, tied="ties")
    assert err.value.arg == "ties"
    with pytest.raises(DataError, match="no labels left: every row holds ties alone"):
        PairwiseData.from_counts(COUNTS.assign(wins=0, losses=0, ties=1), tied="ties", ties="drop")
    with pytest.raises(DataError, match="wins: column 'won' not found"):
        PairwiseData.from_counts(COUNTS, wins="won")
    with pytest.raises(DataError, match="ties: expected one of"):
        PairwiseData.from_counts(COUNTS, ties="split")
    # the pairs are from_frame's: an item compared with itself is named by its row
    with pytest.raises(DataError, match=r"row 2 \(index 9\): both are item 'x'"):
        PairwiseData.from_counts(COUNTS.assign(b=["y", "z", "x"]), tied="ties", ties="half")


def test_views_and_splits_carry_the_weights():
    data = PairwiseData.from_counts(COUNTS, tied="ties", ties="half")
    part = data.subset([0, 2, 3])
    assert part.weights.tolist() == [10.0, 5.0, 3.0] and part.tie_halves.tolist() == [False, True, False]
    assert data.subset([0]).tie_halves is None
    frame = data.to_frame()
    assert frame["weight"].tolist() == data.weights.tolist()
    assert data.subset([7]).weights is None and "weight" not in data.subset([7]).to_frame()  # weight 1
    train, test = split_pairs(data, test_fraction=0.34, seed=0)
    assert set(np.unique(train.source_rows)).isdisjoint(np.unique(test.source_rows))  # a row stays whole
    assert train.label_weights.sum() + test.label_weights.sum() == data.label_weights.sum()


def test_a_shard_of_a_csv_carries_the_weight_column(tmp_path):
    df = pd.DataFrame({"a": ["x", "y", "x", "z"], "b": ["y", "z", "z", "y"], "y": [1, 0.5, 0, 1],
                       "w": [2, 4, 1, 3]})
    df.to_csv(tmp_path / "pairs.csv", index=False)
    whole = PairwiseData.from_frame(df, weight="w", ties="half")
    shard = PairwiseData.read_shard(tmp_path / "pairs.csv", weight="w", ties="half", rank=0, world=1)
    assert shard.weights.tolist() == whole.weights.tolist() == [2.0, 2.0, 2.0, 1.0, 3.0]
    assert shard.tie_halves.tolist() == whole.tie_halves.tolist()
