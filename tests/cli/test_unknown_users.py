"""A user id the fit has not seen: every crowd model refuses it by name unless the caller asks for
the population's preference (``new_users="consensus"``) or, where the model has one, the prior
predictive of a new user (``new_users="prior"``); the same rule from the command line."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import crowdzoo as cz
from crowdzoo import zoo
from crowdzoo.cli import main
from crowdzoo.errors import ConvergenceWarning

CROWD = [e.name for e in zoo.ZOO if zoo.takes_users(e) and e.data != "links"]


@pytest.fixture(scope="module")
def crowd():
    data, _ = cz.simulate_crowd(n_items=10, n_users=4, n_pairs=160, seed=2)
    names = np.array([f"c{i}" for i in range(10)])
    df = pd.DataFrame({"a": names[data.a], "b": names[data.b], "y": data.y,
                       "user": np.array(["alice", "bob", "carol", "dave"])[data.users]})
    items = pd.DataFrame(np.asarray(data.item_features), index=names, columns=["x0", "x1"])
    return cz.PairwiseData.from_frame(df, items, user="user")


@pytest.fixture(scope="module")
def fits(crowd):
    out = {}
    for name in CROWD:
        model = {"crowdgppl": cz.CrowdGPPL(n_components=2), "collabgp": cz.CollabGP(n_latent=2)}.get(name)
        model = model or zoo.entry(name).model_class()()
        kw = {"crowdgppl": dict(likelihood="exact", max_iter=30), "collabgp": dict(max_iter=20),
              "dpm": dict(n_sweeps=30, burn_in=10, n_chains=1)}.get(name, {})
        e = zoo.entry(name)
        kw = {k: v for k, v in kw.items() if k in zoo.route_settings(e.route(e.default))}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            out[name] = cz.fit(model, crowd, **kw)
    return out


A, B = ["c0", "c1", "c2"], ["c3", "c4", "c5"]


@pytest.mark.parametrize("name", CROWD)
def test_an_unseen_user_is_refused_by_name(fits, name):
    with pytest.raises(cz.DataError, match=r"row 1: user id 'Alice' is not a training user .*'Alice'") as err:
        fits[name].predict_proba(A, B, users=["bob", "Alice", "Alice"])
    assert err.value.arg == "users" and err.value.row == 1 and err.value.ids == ["Alice"]


@pytest.mark.parametrize("name", CROWD)
def test_consensus_for_unseen_users_is_the_population_row_by_row(fits, name):
    post = fits[name]
    users = ["bob", "Alice", "carol"]
    if name == "collabgp":  # no consensus, and a featureless new user's prior predictive is ½
        for how in ("consensus", "prior"):
            with pytest.raises(cz.DataError, match=f"new_users='{how}': collabGP has no consensus"):
                post.predict_proba(A, B, users=users, new_users=how)
        return
    p = post.predict_proba(A, B, users=users, new_users="consensus")
    known = post.predict_proba(A, B, users=["bob", "bob", "carol"])
    population = post.predict_proba(A, B)
    assert p[0] == pytest.approx(known[0], abs=1e-12) and p[2] == pytest.approx(known[2], abs=1e-12)
    assert p[1] == pytest.approx(population[1], abs=1e-12)


def test_crowdgppl_prior_for_a_new_user_widens_the_consensus(fits):
    """w_c ~ N(0, 1/s_w) for a user not seen: the consensus's mean, a larger variance, so P lies
    between ½ and the consensus P. The route through the items' rows and the one through each pair's
    own rows (used with per-draw kernels) agree."""
    post = fits["crowdgppl"]
    a, b = ["c0", "c1", "c2", "c6"], ["c3", "c4", "c5", "c9"]
    p = post.predict_proba(a, b, users="zed", new_users="prior")
    cons = post.predict_proba(a, b)
    assert np.all(np.abs(p - 0.5) < np.abs(cons - 0.5)) and np.all(np.sign(p - 0.5) == np.sign(cons - 0.5))
    ia = torch_positions(post, a)
    ib = torch_positions(post, b)
    by_pairs = post._predict_by_pairs(ia, ib, None, None, "prior")
    np.testing.assert_allclose(by_pairs, p, atol=1e-10)


def torch_positions(post, ids):
    import torch
    return torch.as_tensor(pd.Index(post.data.item_ids).get_indexer(ids), dtype=torch.long)


def test_dpm_prior_is_its_crp_predictive(fits):
    post = fits["dpm"]
    p = post.predict_proba(A, B, users=["Alice"] * 3, new_users="prior")
    np.testing.assert_allclose(p, post.predict_proba(A, B), atol=1e-12)


def test_gppl_per_user_has_no_prior_for_a_new_user(fits):
    with pytest.raises(cz.DataError, match="new_users='prior': GPPL per user shares nothing"):
        fits["gppl-per-user"].predict_proba(A, B, users="Alice", new_users="prior")


def test_bad_new_users_value(fits):
    with pytest.raises(cz.DataError, match=r"new_users: expected one of \['error', 'consensus', 'prior'\]"):
        fits["crowdgppl"].predict_proba(A, B, users="bob", new_users="population")


# ------------------------------------------------------------------------------- the command line
@pytest.fixture(scope="module")
def run(tmp_path_factory, crowd):
    """A DPM run fitted from a ';'-separated winner-first CSV with string ids."""
    d = tmp_path_factory.mktemp("unknown")
    fr = crowd.to_frame()
    win = np.where(fr["y"] > 0.5, fr["a"], fr["b"])
    lose = np.where(fr["y"] > 0.5, fr["b"], fr["a"])
    pd.DataFrame({"taster": fr["user"], "winner": win, "loser": lose}).to_csv(d / "train.csv", sep=";",
                                                                              index=False)
    rc = main(["fit", "dpm", "--pairs", str(d / "train.csv"), "--sep", ";", "--a-col", "winner",
               "--b-col", "loser", "--winner-first", "--user-col", "taster", "--out", str(d / "run"),
               "--no-progress", "--n-sweeps", "30", "--burn-in", "10", "--n-chains", "1"])
    assert rc == 0
    new = pd.DataFrame({"taster": ["bob", "Alice", "carol", "Alice"], "winner": ["c0", "c1", "c2", "c7"],
                        "loser": ["c3", "c4", "c5", "c8"]})
    new.to_csv(d / "new.csv", sep=";", index=False)
    return d


def _predict(run, *extra):
    out = run / f"p{len(list(run.glob('p*.csv')))}.csv"
    before = (run / "new.csv").read_bytes()
    rc = main(["predict", str(run / "run"), "--pairs", str(run / "new.csv"), "-o", str(out), *extra])
    assert (run / "new.csv").read_bytes() == before
    return rc, out


def test_cli_refuses_an_unseen_user_naming_its_flags(run, capsys):
    rc, out = _predict(run)
    err = capsys.readouterr().err
    assert rc != 0 and not out.exists()
    assert "column 'taster' (the run's --user-col): row 1: user 'Alice' was not in the fit's data" in err
    assert "--unknown-users consensus" in err and "user_features" not in err and "new_users" not in err


def test_cli_unknown_users_per_row(run):
    rc, out = _predict(run, "--unknown-users", "consensus")
    assert rc == 0
    cons = pd.read_csv(out, sep=";")
    rc, out = _predict(run, "--unknown-users", "drop")
    dropped = pd.read_csv(out, sep=";")
    assert list(dropped["taster"]) == ["bob", "carol"]
    np.testing.assert_allclose(dropped["p"], cons["p"].iloc[[0, 2]], atol=1e-12)
    rc, out = _predict(run, "--consensus")
    everyone = pd.read_csv(out, sep=";")
    np.testing.assert_allclose(cons["p"].iloc[[1, 3]], everyone["p"].iloc[[1, 3]], atol=1e-12)
    assert json.loads((run / "run" / "run.json").read_text())["user_col"] == "taster"


def test_cli_unknown_item_names_the_column(run, capsys):
    bad = pd.DataFrame({"taster": ["bob"], "winner": ["c0"], "loser": ["c99"]})
    bad.to_csv(run / "bad.csv", sep=";", index=False)
    rc = main(["predict", str(run / "run"), "--pairs", str(run / "bad.csv")])
    err = capsys.readouterr().err
    assert rc != 0
    assert "column 'loser' (the run's --b-col): row 0: item 'c99' was not in the fit's data" in err
    assert "item_features" not in err
