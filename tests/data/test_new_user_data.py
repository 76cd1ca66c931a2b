"""Data and diagnostics: what a new user meets with their own CSV.

Layouts (winner-first with ``y=None``, ``items=None``, items without feature columns, a tie column
with ``ties="half"``), warnings about uninformative features, error messages in the user's ids and
column names, frames never changed, and checks that do not depend on the orientation of a pair.
"""
import contextlib
import warnings

import numpy as np
import pandas as pd
import pytest
from arviz_base import from_dict

import crowdzoo as cz
from crowdzoo import DataError, PairwiseData
from crowdzoo.diagnostics import checks as ck
from crowdzoo.errors import DataWarning

FILMS = pd.DataFrame(
    {"budget_musd": [0.1, 20.0, 3.5, 60.0], "year": [1977, 1999, 1986, 2010], "genre": list("hdds")},
    index=pd.Index(["film_eraserhead", "film_matrix", "film_velvet", "film_inception"], name="film"))
NUMERIC = FILMS[["budget_musd", "year"]]
JUDGED = pd.DataFrame({"rater": ["ann", "bob", "ann", "cy"],
                       "winner": ["film_matrix", "film_velvet", "film_inception", "film_matrix"],
                       "loser": ["film_eraserhead", "film_matrix", "film_velvet", "film_inception"],
                       "tie": [False, True, False, False]},
                      index=pd.Index([10, 11, 12, 13], name="judgement"))
CLEAR = JUDGED[~JUDGED.tie].assign(y=1)  # no tie, and a y column: for the tests not about layouts


@contextlib.contextmanager
def _quiet():
    """A context in which any warning is an error (clean data must not warn)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# ------------------------------------------------------------------ layouts
def test_winner_first_layout_needs_no_y_column():
    data = PairwiseData.from_frame(JUDGED[~JUDGED.tie], NUMERIC, a="winner", b="loser", y=None, user="rater")
    assert data.n_pairs == 3 and (data.y == 1).all()
    back = data.to_frame()
    assert back["a"].tolist() == ["film_matrix", "film_inception", "film_matrix"]
    assert back["user"].tolist() == ["ann", "ann", "cy"]
    same = PairwiseData.from_frame(JUDGED[~JUDGED.tie].assign(y=1), NUMERIC, a="winner", b="loser",
                                   user="rater")
    pd.testing.assert_frame_equal(back, same.to_frame())


def test_items_none_takes_the_sorted_ids_with_no_features():
    data = PairwiseData.from_frame(JUDGED[~JUDGED.tie], a="winner", b="loser", y=None)
    assert list(data.item_ids) == sorted(["film_matrix", "film_eraserhead", "film_inception", "film_velvet"])
    assert data.item_features.shape == (4, 0)
    assert data.to_frame()["b"].tolist() == ["film_eraserhead", "film_velvet", "film_inception"]
    # ids that cannot be sorted (mixed types) keep their order of first appearance, row by row
    mixed = PairwiseData.from_frame(pd.DataFrame({"a": [3, "x"], "b": [1, 3]}), y=None)
    assert list(mixed.item_ids) == [3, 1, "x"]


def test_items_without_feature_columns_are_accepted_everywhere():
    with _quiet():
        d1 = PairwiseData.from_frame(CLEAR, pd.DataFrame(index=FILMS.index), a="winner", b="loser")
        d2 = PairwiseData.from_arrays([0, 1], [1, 2], [1, 0], np.zeros((3, 0)))
    assert d1.item_features.shape == (4, 0) and list(d1.item_ids) == list(FILMS.index)
    assert d2.item_features.shape == (3, 0) and d2.items_frame().shape == (3, 0)
    assert d1.subset([0]).item_features.shape == (4, 0)


def test_a_tie_column_with_ties_half_drop_and_error():
    kw = dict(a="winner", b="loser", y=None, user="rater", tie="tie")
    half = PairwiseData.from_frame(JUDGED, NUMERIC, ties="half", **kw).to_frame()
    # the tie (row 1) becomes velvet ≻ matrix and matrix ≻ velvet, both by bob, in place
    assert half["a"].tolist() == ["film_matrix", "film_velvet", "film_matrix", "film_inception",
                                  "film_matrix"]
    assert half["b"].tolist() == ["film_eraserhead", "film_matrix", "film_velvet", "film_velvet",
                                  "film_inception"]
    assert half["user"].tolist() == ["ann", "bob", "bob", "ann", "cy"] and (half["y"] == 1).all()
    dropped = PairwiseData.from_frame(JUDGED, NUMERIC, ties="drop", **kw)
    assert dropped.n_pairs == 3
    with pytest.raises(DataError, match=r"column 'tie', row 1 \(index 11\): marked as a tie.*ties='half'"):
        PairwiseData.from_frame(JUDGED, NUMERIC, **kw)
    # y = 0.5 marks a tie as before, and ties="half" splits it too; a tie column wins over y
    labelled = JUDGED.assign(y=[1, 0.5, 0, 1]).drop(columns="tie")
    half_y = PairwiseData.from_frame(labelled, NUMERIC, a="winner", b="loser", ties="half")
    assert half_y.y.tolist() == [1, 1, 1, 0, 1] and half_y.n_pairs == 5
    flagged = PairwiseData.from_frame(JUDGED.assign(y=[1, 0, 0, 1]), NUMERIC, a="winner", b="loser",
                                      tie="tie", ties="half")
    assert flagged.y.tolist() == [1, 1, 1, 0, 1]
    with pytest.raises(DataError, match=r"column 'tie', row 2 \(index 12\): 'maybe' is not a tie flag"):
        PairwiseData.from_frame(JUDGED.assign(tie=["no", "yes", "maybe", "no"]), NUMERIC, ties="half", **kw)
    with pytest.raises(DataError, match="ties: expected one of 'error', 'drop', 'half', 'model', got 'split"):
        PairwiseData.from_frame(JUDGED, NUMERIC, ties="split", **kw)


# ------------------------------------------------------------------ warnings
def test_constant_and_duplicated_columns_warn_by_name():
    items = NUMERIC.assign(country=1.0, budget_again=NUMERIC["budget_musd"], colour=1)
    with pytest.warns(DataWarning) as got:
        PairwiseData.from_frame(CLEAR, items, a="winner", b="loser")
    text = [str(w.message) for w in got]
    assert any("columns 'country', 'colour' are constant" in t for t in text), text
    assert any("'budget_again' = 'budget_musd'" in t for t in text), text
    assert all(w.filename == __file__ for w in got)  # attributed to the caller's line
    # from_arrays names columns by position when it has no names
    with pytest.warns(DataWarning, match="items share|column 1 is constant"):
        PairwiseData.from_arrays([0], [1], [1], np.c_[np.arange(3.0), np.ones(3)])
    with _quiet():  # informative, distinct features: no warning
        PairwiseData.from_frame(CLEAR, NUMERIC, a="winner", b="loser")


def test_items_with_identical_features_warn_with_their_ids():
    items = NUMERIC.assign(year=[1977, 1999, 1977, 1999], budget_musd=[1.0, 2.0, 1.0, 2.0])
    with pytest.warns(DataWarning, match=r"4 items share their feature vector.*"
                                         r"'film_eraserhead' = 'film_velvet'.*forces the utilities"):
        PairwiseData.from_frame(CLEAR, items, a="winner", b="loser")


# ------------------------------------------------------------------ error messages
def test_errors_name_the_users_ids_and_columns():
    items = NUMERIC.copy()
    items.loc["film_eraserhead", "budget_musd"] = np.nan
    with pytest.raises(DataError, match=r"^items: item 'film_eraserhead', column 'budget_musd': value nan "
                                        r"is not finite"):
        PairwiseData.from_frame(CLEAR, items, a="winner", b="loser")
    with pytest.raises(DataError, match=r"items: column 'genre' is not numeric \(item 'film_eraserhead': "
                                        r"'h'\).*get_dummies"):
        PairwiseData.from_frame(CLEAR, FILMS, a="winner", b="loser")
    # an item compared with itself: the user's columns, the id, and the row of df (also after a dropped tie)
    selfie = JUDGED.assign(loser=["film_eraserhead", "film_matrix", "film_inception", "film_inception"], y=1)
    with pytest.raises(DataError, match=r"columns 'winner', 'loser', row 2 \(index 12\): both are item "
                                        r"'film_inception'"):
        PairwiseData.from_frame(selfie, NUMERIC, a="winner", b="loser")
    with pytest.raises(DataError, match=r"row 2 \(index 12\): both are item 'film_inception'"):
        PairwiseData.from_frame(selfie, NUMERIC, a="winner", b="loser", y=None, tie="tie", ties="drop")
    with pytest.raises(DataError, match=r"column 'loser', row 3 \(index 13\): item id 'film_x' not found"):
        PairwiseData.from_frame(JUDGED.assign(loser=JUDGED.loser.where(JUDGED.rater != "cy", "film_x")),
                                NUMERIC, a="winner", b="loser", y=None, tie="tie", ties="drop")
    with pytest.raises(DataError, match=r"column 'label', row 3 \(index 13\): label 2 is not 0 or 1"):
        PairwiseData.from_frame(JUDGED.assign(label=[1, 0, 1, 2]), NUMERIC, a="winner", b="loser", y="label",
                                tie="tie", ties="drop")
    with pytest.raises(DataError, match=r"column 'winner', row 0 \(index 10\): missing item id"):
        PairwiseData.from_frame(JUDGED.assign(winner=[None, "film_velvet", "film_inception", "film_matrix"]),
                                a="winner", b="loser", y=None, tie="tie", ties="drop")
    with pytest.raises(DataError, match=r"^y: column 'y' not found in df"):
        PairwiseData.from_frame(JUDGED, NUMERIC, a="winner", b="loser")


def test_the_users_frames_are_never_changed():
    frames = {"df": JUDGED.assign(y=[1, 0.5, 0, 1]), "items": NUMERIC.assign(flat=1.0),
              "users": pd.DataFrame({"age": [30.0, 40.0, 50.0]}, index=["ann", "bob", "cy"])}
    before = {k: v.copy(deep=True) for k, v in frames.items()}
    calls = [dict(ties="half"), dict(ties="drop"), dict(ties="half", tie="tie"), dict(), dict(y=None),
             dict(ties="half", items=None), dict(ties="half", user="rater", users=frames["users"])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        for kw in calls:
            kw = {"items": frames["items"], "a": "winner", "b": "loser", **kw}
            try:
                PairwiseData.from_frame(frames["df"], **kw)
            except DataError:
                pass
    for k in frames:
        pd.testing.assert_frame_equal(frames[k], before[k])
        assert frames[k].index.equals(before[k].index)


# ------------------------------------------------------------------ orientation-free checks
def _winner_first(d: PairwiseData) -> PairwiseData:
    w = d.y == 1
    return PairwiseData.from_arrays(np.where(w, d.a, d.b), np.where(w, d.b, d.a), np.ones(d.n_pairs),
                                    d.item_features, item_ids=d.item_ids)


def test_calibration_does_not_depend_on_the_orientation_of_a_pair():
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, 2000)
    y = (rng.random(2000) < p).astype(float)
    flip = rng.random(2000) < 0.5  # any orientation: here a random half of the pairs written b, a
    c1 = ck.calibration(p, y)
    c2 = ck.calibration(np.where(flip, 1 - p, p), np.where(flip, 1 - y, y))
    c3 = ck.calibration(np.where(y == 1, p, 1 - p), np.ones(2000))  # winner-first: every y = 1
    assert c1.value == c2.value == c3.value and c1.verdict == c3.verdict == "pass"
    sharp = np.where(p > 0.5, 1 - (1 - p) ** 3, p ** 3)
    over = ck.calibration(np.where(y == 1, sharp, 1 - sharp), np.ones(2000), "held-out labels")
    assert over.verdict == "fail"


def test_report_of_a_winner_first_layout_matches_random_orientation(tmp_path):
    data, _ = cz.simulate_gppl(n_items=15, n_pairs=300, n_features=2, seed=0)
    train, test = cz.split_pairs(data, 0.25, seed=0)
    checks = {}
    for name, (tr, te) in {"random": (train, test),
                           "winner-first": (_winner_first(train), _winner_first(test))}.items():
        post = cz.fit(cz.GPPL(), tr, method="natgrad", likelihood="exact", progress_bar=False)
        rep = cz.report(post, tmp_path / f"{name}.html", test=te)
        checks[name] = {c.name: c for c in rep.checks if c.name.startswith("calibration")}
    assert set(checks["random"]) == {"calibration (training labels)", "calibration (held-out labels)"}
    for n, c in checks["winner-first"].items():
        r = checks["random"][n]
        assert c.verdict == r.verdict == "pass", (n, c.value, r.value)
        assert c.extra["ece"] == pytest.approx(r.extra["ece"], abs=0.01), n


FIRST = "PPC: user first-item rates"


def _crowd_tree(y, a, b, user, rep):
    return from_dict({"observed_data": {"y": y}, "constant_data": {"a": a, "b": b, "user": user},
                      "posterior_predictive": {"y": rep}, "posterior": {"f": np.zeros((1, rep.shape[1], 1))}},
                     dims={"y": ["pair"], "a": ["pair"], "b": ["pair"], "user": ["pair"]},
                     coords={"pair": np.arange(y.size)}, attrs={"/": {"approximate": 1}})


def _crowd(seed=0, n_items=20, n_users=10, per_user=200, S=400):
    rng = np.random.default_rng(seed)
    f = np.linspace(-2, 2, n_items)
    L = n_users * per_user
    a = rng.integers(0, n_items, L)
    b = (a + rng.integers(1, n_items, L)) % n_items
    user = np.repeat(np.arange(n_users), per_user)
    p = 1 / (1 + np.exp(-(f[a] - f[b])))
    y = (rng.random(L) < p).astype(np.int64)
    rep = (rng.random((1, S, L)) < p).astype(np.int64)
    return rng, a, b, user, p, y, rep


def test_first_item_rates_are_skipped_for_a_winner_first_layout():
    rng, a, b, user, p, y, rep = _crowd()
    ids = np.array([f"item{i}" for i in range(20)])
    rand = {c.name: c for c in ck.ppc_win_rates(_crowd_tree(y, ids[a], ids[b], user, rep))}
    assert rand[FIRST].verdict == "pass"
    # the same labels winner-first, with the replicated labels of the same pairs in that orientation
    w = y == 1
    wa, wb = np.where(w, a, b), np.where(w, b, a)
    wrep = np.where(w, rep, 1 - rep)
    first = {c.name: c for c in ck.ppc_win_rates(_crowd_tree(np.ones_like(y), ids[wa], ids[wb], user, wrep))}
    assert first[FIRST].verdict == "skip" and "winner-first" in first[FIRST].detail
    assert first["PPC: item win rates"].value == rand["PPC: item win rates"].value  # orientation-free


def test_first_item_rates_leave_out_ties_written_both_ways():
    """Random orientation plus ties split by ties="half" into a ≻ b and b ≻ a: each tie chooses the
    first-listed item twice, which is not position bias; those labels are left out."""
    rng, a, b, user, p, y, rep = _crowd(seed=1)
    ta = rng.integers(0, 20, 1000)
    tb = (ta + rng.integers(1, 20, 1000)) % 20
    tu = np.repeat(np.arange(10), 100)
    f = np.linspace(-2, 2, 20)
    tp = 1 / (1 + np.exp(-(f[ta] - f[tb])))
    trep = (rng.random((1, 400, 1000)) < tp).astype(np.int64)
    A, B = np.r_[a, ta, tb], np.r_[b, tb, ta]
    Y = np.r_[y, np.ones(2000, dtype=np.int64)]
    REP = np.concatenate([rep, trep, (rng.random((1, 400, 1000)) < 1 - tp).astype(np.int64)], axis=-1)
    c = {c.name: c for c in ck.ppc_win_rates(_crowd_tree(Y, A, B, np.r_[user, tu, tu], REP))}[FIRST]
    assert c.verdict == "pass", (c.value, c.detail)
    # the 2000 tie labels, and the few random pairs that a user happened to see both ways with one answer
    assert 2000 <= int(c.detail.split("; ")[-1].split()[0]) < 2400, c.detail


# ------------------------------------------------------------------ the guide
def test_the_your_data_guide_runs(tmp_path, monkeypatch, capsys):
    """Every snippet of docs/guides/your-data.md, in order, as one script; the messages it quotes are
    the ones raised."""
    import re
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "guides" / "your-data.md").read_text()
    monkeypatch.chdir(tmp_path)
    exec(compile("\n".join(re.findall(r"```python\n(.*?)```", page, re.S)), "your-data.md", "exec"), {})
    out = capsys.readouterr().out
    assert "column 'tie', row 1 (index 1): marked as a tie" in out and "'year_again' = 'year'" in out
    quoted = re.sub(r"\s+", " ", page)
    judged = pd.DataFrame({"winner": ["film_matrix", "film_velvet", "film_inception", "film_matrix"],
                           "loser": ["film_x", "film_matrix", "film_velvet", "film_matrix"]})
    nan = NUMERIC.copy()
    nan.loc["film_eraserhead", "budget_musd"] = np.nan
    for df, items, quote in (
            (judged, None, "columns 'winner', 'loser', row 3 (index 3): both are item 'film_matrix'"),
            (judged, NUMERIC, "column 'loser', row 0 (index 0): item id 'film_x' not found in items table ("),
            (CLEAR, nan, "items: item 'film_eraserhead', column 'budget_musd': value nan is not finite")):
        with pytest.raises(DataError) as err:
            PairwiseData.from_frame(df, items, a="winner", b="loser", y=None)
        assert str(err.value).startswith(quote) and quote in quoted, err.value
