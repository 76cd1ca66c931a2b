"""UKPConvArg loader on a tiny copy written in the published format; text features."""
import numpy as np
import pytest

import crowdzoo as cz
from crowdzoo.data.ukpconvarg import load_ukpconvarg, text_features

HEAD = "#id\tturkerid\tlabel\ta1\ta2\n"
TEXT = {"arg1": "plastic bottles waste oil and water",
        "arg2": '"bottled water is safe in emergencies"',
        "arg3": "tap water is cheaper and tested<br/>more often",
        "arg4": "bottles create jobs for many people"}


def _write(root, name, rows, head=HEAD):
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(head + "".join("\t".join(r) + "\n" for r in rows))


@pytest.fixture
def ukp(tmp_path):
    for fold, (x, y) in {"topic_yes": ("arg1", "arg2"), "topic_no": ("arg3", "arg4")}.items():
        _write(tmp_path, f"UKPConvArgCrowdSample-new-CSV/{fold}.csv",
               [(f"{x}_{y}", "W1", "a1", TEXT[x], TEXT[y]), (f"{y}_{x}", "W2", "a2", TEXT[y], TEXT[x]),
                (f"{x}_{y}", "W3", "equal", TEXT[x], TEXT[y])])
        _write(tmp_path, f"UKPConvArgAll-new-CSV/{fold}.csv",
               [(f"{x}_{y}", "goldLabel", "a1", TEXT[x], TEXT[y])], head="#id\tannotatorid\tlabel\ta1\ta2\n")
        # published files give the winner the lower 'rank' value
        _write(tmp_path, f"UKPConvArg1-Ranking-CSV/{fold}.csv", [(x, "0.1", TEXT[x]), (y, "0.9", TEXT[y])],
               head="#id\trank\targument\n")
    return tmp_path


def test_loader_maps_labels_drops_ties_and_orients_scores(ukp):
    u = load_ukpconvarg(ukp)
    assert u.folds == ["topic_no", "topic_yes"]
    assert len(u.crowd) == 4 and u.n_equal == (2, 0)
    row = u.crowd[(u.crowd.worker == "W1") & (u.crowd.fold == "topic_yes")].iloc[0]
    assert (row.a, row.b, row.y) == ("arg1", "arg2", 1.0)
    row = u.crowd[(u.crowd.worker == "W2") & (u.crowd.fold == "topic_yes")].iloc[0]
    assert (row.a, row.b, row.y) == ("arg2", "arg1", 0.0)  # a2 said: arg1 wins either way
    s = u.scores.set_index("id").score
    assert s["arg1"] > s["arg2"]  # the gold winner scores higher after orientation
    assert set(u.texts.index) == set(TEXT)


def test_loader_errors_name_file_row_and_column(ukp, tmp_path_factory):
    bad = ukp / "UKPConvArgCrowdSample-new-CSV" / "topic_no.csv"
    bad.write_text(HEAD + "arg3_arg4\tW1\tmaybe\tx\ty\n")
    with pytest.raises(cz.DataError,
                       match=r"topic_no.csv: row 2: column 'label' must be a1, a2 or equal, got 'maybe'"):
        load_ukpconvarg(ukp)
    with pytest.raises(cz.DataError, match="UKPConvArgCrowdSample-new-CSV not found"):
        load_ukpconvarg(tmp_path_factory.mktemp("empty"))


def test_text_features_are_deterministic_unit_rows(ukp):
    texts = load_ukpconvarg(ukp).texts
    many = texts.reindex(texts.index.repeat(3))
    many.index = [f"{i}_{k}" for k, i in enumerate(many.index)]
    F1, F2 = text_features(many, n_features=3, seed=0), text_features(many, n_features=3, seed=0)
    np.testing.assert_array_equal(F1.to_numpy(), F2.to_numpy())
    np.testing.assert_allclose(np.linalg.norm(F1.to_numpy(), axis=1), 1.0)
    assert list(F1.index) == list(many.index)


def test_diagnostics_comparison_splits_by_fold_and_tabulates_verdicts(ukp):
    """ukpconvarg-diagnostics trains on the other folds' crowd labels and checks calibration on the
    held-out fold's gold pairs, both by argument id; its table has one cell per check and model."""
    import pandas as pd

    from crowdzoo.comparisons.ukpconvarg_diagnostics import _data, summarise

    u = load_ukpconvarg(ukp)
    F = pd.DataFrame(np.eye(4), index=u.texts.index)
    train, test = _data(u, F, "topic_yes")
    assert set(train.item_ids[np.r_[train.a, train.b]]) == {"arg3", "arg4"}
    assert set(train.user_ids[train.users]) == {"W1", "W2"}
    assert list(test.item_ids[test.a]) == ["arg1"] and list(test.item_ids[test.b]) == ["arg2"]
    df = pd.DataFrame({"seed": 0, "fold": "topic_yes", "method": ["GPPL", "GPPL", "crowdGPPL"],
                       "check": ["r̂", "PSIS-LOO", "r̂"], "verdict": ["skip", "warn", "pass"],
                       "value": ["–", "elpd −3", "max 1.00"], "report": "runs/x/GPPL.html"})
    table = summarise(df).splitlines()
    assert table[0] == "| check | GPPL | crowdGPPL |"
    assert table[3] == "| PSIS-LOO | **warn** elpd −3 | – |"
