"""``crowdzoo suggest`` on a run fitted from files laid out as a user keeps them (string ids, ';',
winner first, a tie column): the next queries in the run's own column names, for the users asked,
from the candidates given, with a clear error for bad input and the input files unchanged."""
import numpy as np
import pandas as pd
import pytest

from crowdzoo.cli import main

BEANS = [f"bean_{c}" for c in "abcdefgh"]
TASTERS = ["ann", "bob", "cy", "dee", "eve", "fay"]
LAYOUT = ["--sep", ";", "--a-col", "winner", "--b-col", "loser", "--winner-first", "--tie-col", "tie",
          "--ties", "half"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("suggest")
    rng = np.random.default_rng(0)
    f = dict(zip(BEANS, rng.normal(size=len(BEANS)), strict=True))
    rows = []
    for k in range(60):
        i, j = rng.choice(BEANS, 2, replace=False)
        w, lo = (i, j) if f[i] - f[j] + rng.normal(0, 0.5) > 0 else (j, i)
        rows.append({"taster": TASTERS[k % 6], "winner": w, "loser": lo, "tie": "yes" if k == 7 else "no"})
    pd.DataFrame(rows).to_csv(d / "pairs.csv", sep=";", index=False)
    pd.DataFrame({"bean": BEANS, "x": np.arange(8.0)}).to_csv(d / "beans.csv", sep=";", index=False)
    assert main(["fit", "crowdgppl", "--pairs", d / "pairs.csv", "--items", d / "beans.csv",
                 "--id-col", "bean", *LAYOUT, "--user-col", "taster", "--components", "2", "--max-iter", "20",
                 "--no-progress",                 "--outputs", "utilities", "--out", d / "run"]) == 0
    return d


def _read(path):
    return pd.read_csv(path, sep=";")


def test_suggest_writes_the_runs_columns_without_repeats(run):
    before = (run / "pairs.csv").read_bytes()
    assert main(["suggest", run / "run", "--n", "6", "-o", run / "next.csv"]) == 0
    nxt = _read(run / "next.csv")
    assert set(nxt.columns) == {"winner", "loser", "taster", "score"}
    assert len(nxt) == 6 and set(nxt.winner) | set(nxt.loser) <= set(BEANS)
    assert set(nxt.taster) <= set(TASTERS)
    keys = {(u, *sorted((a, b))) for a, b, u in zip(nxt.winner, nxt.loser, nxt.taster, strict=True)}
    assert len(keys) == 6 and (nxt.winner != nxt.loser).all()
    assert (run / "pairs.csv").read_bytes() == before
    # -o again needs --overwrite; with it, the same seed gives the same batch
    assert main(["suggest", run / "run", "--n", "6", "-o", run / "next.csv"]) == 2
    assert main(["suggest", run / "run", "--n", "6", "-o", run / "next.csv", "--overwrite"]) == 0
    pd.testing.assert_frame_equal(_read(run / "next.csv"), nxt)


def test_suggest_asks_only_the_given_users_among_the_candidates(run):
    assert main(["suggest", run / "run", "--n", "3", "--users", "bob,eve", "-o", run / "two.csv"]) == 0
    assert set(_read(run / "two.csv").taster) <= {"bob", "eve"}
    cand = pd.DataFrame({"winner": ["bean_a", "bean_b", "bean_c"], "loser": ["bean_d", "bean_e", "bean_f"],
                         "taster": ["ann", "cy", "fay"]})
    cand.to_csv(run / "cand.csv", sep=";", index=False)
    assert main(["suggest", run / "run", "--n", "2", "--candidates", run / "cand.csv",
                 "-o", run / "c.csv"]) == 0
    got = _read(run / "c.csv")
    allowed = set(zip(cand.winner, cand.loser, cand.taster, strict=True))
    assert len(got) == 2 and all((a, b, u) in allowed or (b, a, u) in allowed
                                 for a, b, u in zip(got.winner, got.loser, got.taster, strict=True))


def test_suggest_refuses_bad_input_by_name(run, capsys):
    assert main(["suggest", run / "run", "--n", "0"]) == 2
    assert "--n" in capsys.readouterr().err
    assert main(["suggest", run / "run", "--candidates", run / "missing.csv"]) == 2
    assert "--candidates" in capsys.readouterr().err
    bad = pd.DataFrame({"winner": ["bean_a"], "loser": ["bean_zz"], "taster": ["ann"]})
    bad.to_csv(run / "bad.csv", sep=";", index=False)
    assert main(["suggest", run / "run", "--candidates", run / "bad.csv"]) == 2
    err = capsys.readouterr().err
    assert "bean_zz" in err and "loser" in err and "=" not in err.split("error:")[1].split("(")[0]
    assert main(["suggest", run / "run", "--users", "zed"]) == 2
    assert "zed" in capsys.readouterr().err
    assert main(["suggest", run / "nowhere"]) == 2
