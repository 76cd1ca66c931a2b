"""The command line as a new user meets it: a small CSV set written here (films with string
ids, a genre string column and numeric features; raters; a winner/loser layout with a tie column),
fitted, predicted and broken in the ways a user breaks it. Everything goes through
``crowdzoo.cli.main`` in-process, with tiny fits (seconds each)."""
import json
import os
import shlex
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import crowdzoo as cz
from crowdzoo.cli import _parser, main, route_flags
from crowdzoo.cli.flags import route_settings_static

NAMES = ["eraserhead", "alien", "heat", "amelie", "brazil", "clue", "jaws", "fargo", "rushmore", "psycho",
         "up", "big"]
GENRES = ["drama", "horror", "drama", "comedy", "comedy", "comedy", "horror", "drama", "comedy", "horror",
          "comedy", "comedy"]
RATERS = ["ann", "bob", "cy", "dee"]
#: how the pairs file is laid out: winner first, no label column, a tie flag
LAYOUT = ["--a-col", "winner", "--b-col", "loser", "--winner-first", "--tie-col", "tie"]
ITEMS = ["--id-col", "film", "--one-hot", "genre"]
QUICK = ["--method", "natgrad", "--max-iter", "50", "--no-progress"]


@pytest.fixture
def csvs(tmp_path):
    """films.csv (film, genre, year, budget_musd), pairs.csv (rater, winner, loser, tie; 160 rows,
    8 ties), new.csv (pairs to predict)."""
    rng = np.random.default_rng(0)
    films = pd.DataFrame({"film": [f"film_{n}" for n in NAMES], "genre": GENRES,
                          "year": rng.integers(1960, 2010, len(NAMES)),
                          "budget_musd": rng.gamma(2.0, 10.0, len(NAMES)).round(1)})
    f = (0.03 * (films.year - 1985) - 0.04 * films.budget_musd
         + films.genre.map({"drama": 0.8, "comedy": 0.0, "horror": -0.5}))
    rows = []
    for k in range(160):
        i, j = rng.choice(len(NAMES), 2, replace=False)
        r = RATERS[k % 4]
        d = f[i] - f[j] + (0.5 if r in ("ann", "bob") else -0.5) * (films.year[i] - films.year[j]) / 20
        w, lo = (i, j) if rng.random() < 1 / (1 + np.exp(-2 * d)) else (j, i)
        rows.append({"rater": r, "winner": films.film[w], "loser": films.film[lo], "tie": int(k % 20 == 7)})
    films.to_csv(tmp_path / "films.csv", index=False)
    pd.DataFrame(rows).to_csv(tmp_path / "pairs.csv", index=False)
    pd.DataFrame({"rater": ["ann", "bob", "cy"], "winner": ["film_up", "film_up", "film_heat"],
                  "loser": ["film_big", "film_big", "film_jaws"]}).to_csv(tmp_path / "new.csv", index=False)
    return tmp_path


def _files(d, items=True):
    return ["--pairs", str(d / "pairs.csv"), *(["--items", str(d / "films.csv"), *ITEMS] if items else []),
            *LAYOUT]


def _error(capsys) -> str:
    err = "".join(line for line in capsys.readouterr().err.splitlines(True)
                  if not line.startswith("crowdzoo: fitted"))  # an earlier fit's summary line
    assert err.startswith("crowdzoo: error:") and "Traceback" not in err, err
    return err


# ---------------------------------------------------------------- end to end
def test_fit_gppl_then_predict(csvs, capsys):
    run = csvs / "run"
    assert main(["fit", "gppl", *_files(csvs), "--ties", "half", *QUICK, "--out", str(run)]) == 0
    post = cz.load(run / "posterior.pt")
    util = pd.read_csv(run / "utilities.csv")
    assert set(util["item"]) == {f"film_{n}" for n in NAMES}
    assert post.data.item_features.shape[1] == 2 + 3  # year, budget and three genres one-hot
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["n_pairs"] == 160 + 8  # ties="half": a tie is two labels, one each way
    capsys.readouterr()
    out = csvs / "p.csv"
    assert main(["predict", str(run), "--pairs", str(csvs / "new.csv"), "-o", str(out)]) == 0
    p = pd.read_csv(out)
    assert list(p.columns) == ["rater", "winner", "loser", "p"]
    np.testing.assert_allclose(p["p"], post.predict_proba(p["winner"], p["loser"]))
    assert main(["predict", str(run), "--pairs", str(csvs / "new.csv")]) == 0  # to standard output
    assert "film_up,film_big" in capsys.readouterr().out


def test_fit_crowdgppl_personal_utilities_then_predict(csvs, capsys):
    run = csvs / "crowd"
    code = main(["fit", "crowdgppl", *_files(csvs), "--ties", "drop", "--user-col", "rater",
                 "--components", "2", "--method", "natgrad", "--max-iter", "8", "--no-progress",
                 "--out", str(run)])
    assert code == 0
    assert json.loads((run / "metrics.json").read_text())["n_pairs"] == 160 - 8
    personal = pd.read_csv(run / "utilities_personal.csv", index_col=0)
    assert personal.shape == (len(NAMES), len(RATERS)) and list(personal.columns) == RATERS
    post = cz.load(run / "posterior.pt")
    mean, _ = post.utilities(users=RATERS)
    np.testing.assert_allclose(personal.to_numpy(), mean.to_numpy())
    out = csvs / "p.csv"
    assert main(["predict", str(run), "--pairs", str(csvs / "new.csv"), "-o", str(out)]) == 0
    p = pd.read_csv(out)
    np.testing.assert_allclose(p["p"], post.predict_proba(p["winner"], p["loser"], users=p["rater"]))
    assert p["p"][0] != p["p"][1]  # same pair, two raters: their own preferences
    pd.DataFrame({"winner": ["film_up"], "loser": ["film_big"]}).to_csv(csvs / "nouser.csv", index=False)
    capsys.readouterr()
    assert main(["predict", str(run), "--pairs", str(csvs / "nouser.csv")]) == 2
    err = _error(capsys)
    assert "'rater'" in err and "--consensus" in err


# ---------------------------------------------------------------- item 4: --out
def test_out_is_checked_before_fitting(csvs, capsys):
    base = ["fit", "gppl", *_files(csvs), *QUICK, "--out"]
    assert main([*base, str(csvs / "films.csv")]) == 2
    assert "--out" in _error(capsys) and not (csvs / "films.csv").is_dir()
    assert main([*base, str(csvs / "films.csv" / "run")]) == 2
    assert "is a file" in _error(capsys)
    locked = csvs / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    target = locked / "run" if os.geteuid() != 0 else "/sys/crowdzoo-run"  # root writes anywhere but /sys
    try:
        assert main([*base, str(target)]) == 2
        assert "cannot write" in _error(capsys)
    finally:
        locked.chmod(0o700)
    # a failed validation leaves no folder behind
    assert main(["fit", "gppl", *_files(csvs), "--y-col", "label", "--out", str(csvs / "new" / "run")]) == 2
    _error(capsys)
    assert not (csvs / "new").exists()


def test_existing_run_needs_overwrite_which_removes_stale_files(csvs, capsys):
    run = csvs / "run"
    args = ["fit", "gppl", *_files(csvs), "--ties", "drop", *QUICK, "--out", str(run)]
    assert main(args) == 0
    (run / "diagnostics.html").write_text("<html>an old report</html>")
    mtime = (run / "posterior.pt").stat().st_mtime_ns
    capsys.readouterr()
    assert main(args) == 2
    err = _error(capsys)
    assert "--overwrite" in err and "already holds a run" in err
    assert (run / "posterior.pt").stat().st_mtime_ns == mtime  # nothing was fitted or written
    assert main([*args, "--overwrite"]) == 0
    assert not (run / "diagnostics.html").exists()
    assert (run / "posterior.pt").is_file()


# ---------------------------------------------------------------- item 5: Ctrl-C and --resume
def test_ctrl_c_keeps_a_checkpoint_and_resume_continues(csvs, capsys, monkeypatch):
    import crowdzoo.inference.natgrad as loop

    real = loop.progress

    def interrupting(total, desc, enabled):
        bar = real(total, desc, False)
        calls = {"n": 0}
        update = bar.update

        def update_then_interrupt(n=1):
            calls["n"] += 1
            if calls["n"] == 6:  # the 5th iteration (the first call sets the start)
                raise KeyboardInterrupt
            return update(n)

        bar.update = update_then_interrupt
        return bar

    run = csvs / "run"
    args = ["fit", "gppl", *_files(csvs), "--ties", "drop", "--method", "natgrad", "--max-iter", "40",
            "--tol", "1e-9", "--no-progress", "--out", str(run)]
    monkeypatch.setattr(loop, "progress", interrupting)
    assert main(args) == 130
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    ckpt = run / "checkpoint.pt"
    assert ckpt.is_file() and str(ckpt) in lines[0] and f"--resume {ckpt}" in lines[0]
    monkeypatch.setattr(loop, "progress", real)
    command = shlex.split(lines[0].split("continue it with: ", 1)[1])
    assert command[0] == "crowdzoo"
    assert main(command[1:]) == 0
    assert not ckpt.exists()  # consumed: posterior.pt holds the fit
    resumed = cz.load(run / "posterior.pt")
    assert main([*args[:-1], str(csvs / "whole")]) == 0
    whole = cz.load(csvs / "whole" / "posterior.pt")
    a, b = whole.data.item_ids[:6], whole.data.item_ids[6:]
    np.testing.assert_array_equal(resumed.predict_proba(a, b), whole.predict_proba(a, b))
    capsys.readouterr()
    assert main(["fit", "gppl", *_files(csvs), "--ties", "drop", "--method", "ep", "--resume", str(ckpt),
                 "--out", str(csvs / "ep")]) == 2
    assert "--resume" in _error(capsys)


# ---------------------------------------------------------------- item 7: clean errors, refused options
def test_empty_or_unreadable_csv_names_the_flag(csvs, capsys):
    (csvs / "empty.csv").write_bytes(b"")
    (csvs / "binary.csv").write_bytes(bytes(range(256)) * 4)
    (csvs / "users.csv").write_bytes(b"")
    for flag, path, args in (("--pairs", "empty.csv", ["--pairs", str(csvs / "empty.csv")]),
                             ("--pairs", "binary.csv", ["--pairs", str(csvs / "binary.csv")]),
                             ("--items", "empty.csv", [*_files(csvs, items=False), "--items",
                                                        str(csvs / "empty.csv")])):
        assert main(["fit", "gppl", *args, "--out", str(csvs / "o")]) == 2
        err = _error(capsys)
        assert err.startswith(f"crowdzoo: error: {flag}:") and path in err
    assert main(["fit", "crowdgppl", *_files(csvs), "--user-col", "rater", "--users", str(csvs / "users.csv"),
                 "--out", str(csvs / "o")]) == 2
    assert _error(capsys).startswith("crowdzoo: error: --users:")
    assert not (csvs / "o").exists()


@pytest.mark.parametrize("model, extra, flag", [
    ("gppl", ["--user-col", "rater"], "--user-col"),
    ("gppl", ["--users", "users.csv"], "--users"),
    ("gppl", ["--components", "3"], "--components"),
    ("bradley-terry", ["--kernel", "se"], "--kernel"),
    ("gppl", ["--method", "ep", "--likelihood", "exact"], "--likelihood"),
    ("gppl", ["--method", "nuts", "--max-iter", "10"], "--max-iter"),
])
def test_options_that_do_not_apply_are_refused(csvs, capsys, model, extra, flag):
    assert main(["fit", model, *_files(csvs), *extra, "--out", str(csvs / "o")]) == 2
    assert _error(capsys).startswith(f"crowdzoo: error: {flag}:")
    assert not (csvs / "o").exists()


# ---------------------------------------------------------------- item 8: the CLI's names in messages
def test_messages_name_the_flags_and_the_users_columns(csvs, capsys):
    base = ["fit", "gppl", "--pairs", str(csvs / "pairs.csv"), "--out", str(csvs / "o")]
    assert main([*base, "--a-col", "winner", "--b-col", "loser"]) == 2  # no y column, no --winner-first
    err = _error(capsys)
    assert "--y-col" in err and "--pairs" in err and " df" not in err
    pairs = pd.read_csv(csvs / "pairs.csv")
    pairs.loc[5, "loser"] = pairs.loc[5, "winner"]
    pairs.to_csv(csvs / "same.csv", index=False)
    assert main(["fit", "gppl", "--pairs", str(csvs / "same.csv"), *LAYOUT, "--ties", "drop",
                 "--out", str(csvs / "o")]) == 2
    err = _error(capsys)
    assert "--pairs" in err and "'winner'" in err and "'loser'" in err and repr(pairs.loc[5, "winner"]) in err
    pairs = pd.read_csv(csvs / "pairs.csv")
    pairs.loc[3, "loser"] = "film_vertigo"  # not in films.csv
    pairs.to_csv(csvs / "unknown.csv", index=False)
    assert main(["fit", "gppl", "--pairs", str(csvs / "unknown.csv"), "--items", str(csvs / "films.csv"),
                 *ITEMS, *LAYOUT, "--ties", "drop", "--out", str(csvs / "o")]) == 2
    err = _error(capsys)
    assert err.startswith("crowdzoo: error: --pairs") and "'film_vertigo'" in err and "'loser'" in err
    assert main(["fit", "gppl", *_files(csvs), "--out", str(csvs / "o")]) == 2  # ties, no --ties
    err = _error(capsys)
    assert "--ties" in err and "ties=" not in err


# ---------------------------------------------------------------- item 9: what a user reached for
def test_sep_and_user_id_col(csvs):
    pd.read_csv(csvs / "pairs.csv").to_csv(csvs / "pairs_semi.csv", sep=";", index=False)
    pd.read_csv(csvs / "films.csv").to_csv(csvs / "films_semi.csv", sep=";", index=False)
    raters = pd.DataFrame({"person": RATERS, "age": [31, 45, 22, 60]})
    raters.to_csv(csvs / "raters.csv", sep=";", index=False)
    run = csvs / "run"
    code = main(["fit", "crowdgppl", "--pairs", str(csvs / "pairs_semi.csv"),
                 "--items", str(csvs / "films_semi.csv"), *ITEMS, *LAYOUT, "--ties", "drop", "--sep", ";",
                 "--user-col", "rater",
                 "--users", str(csvs / "raters.csv"), "--user-id-col", "person", "--components", "1",
                 "--method", "natgrad", "--max-iter", "3", "--no-progress", "--out", str(run)])
    assert code == 0
    post = cz.load(run / "posterior.pt")
    assert list(post.data.user_ids) == RATERS and post.data.user_features.shape == (4, 1)


def test_features_and_one_hot(csvs, capsys):
    base = ["fit", "gppl", "--pairs", str(csvs / "pairs.csv"), "--items", str(csvs / "films.csv"),
            "--id-col", "film", *LAYOUT, "--ties", "drop", *QUICK]
    assert main([*base, "--out", str(csvs / "o")]) == 2  # genre is a string column
    err = _error(capsys)
    assert "'genre'" in err and "--one-hot genre" in err and "--features" in err
    assert main([*base, "--features", "year", "--out", str(csvs / "year")]) == 0
    assert cz.load(csvs / "year" / "posterior.pt").data.item_features.shape == (len(NAMES), 1)
    assert main([*base, "--features", "year,budget", "--out", str(csvs / "o")]) == 2
    assert "'budget'" in _error(capsys)


def test_items_are_optional(csvs):
    run = csvs / "run"
    assert main(["fit", "gppl", "--pairs", str(csvs / "pairs.csv"), *LAYOUT, "--ties", "drop", *QUICK,
                 "--out", str(run)]) == 0
    util = pd.read_csv(run / "utilities.csv")
    assert set(util["item"]) == {f"film_{n}" for n in NAMES}
    assert cz.load(run / "posterior.pt").data.item_features.shape == (len(NAMES), 0)


def test_help_shows_defaults_and_what_y_means(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "1 if a is preferred to b" in text and "--winner-first" in text
    assert "(default: a)" in text and "(default: ,)" in text
    assert "--max-iter" in text and "--batch-size" in text and "--tol" in text
    assert "predict" in _parser().format_help()


# ---------------------------------------------------------------- item 3: route settings, warnings
def test_route_settings_are_generated_flags(csvs):
    flags = route_flags()
    for e in cz.ZOO:
        for method in e.routes:
            accepted = cz.zoo.route_settings(e.route(method))
            static = route_settings_static(e, method)
            assert list(static) == list(accepted), (e.name, method)
            for name, default in accepted.items():
                if name in flags:
                    assert static[name] == default
    assert {"max_iter", "tol", "batch_size", "likelihood", "num_samples", "lr"} <= set(flags)
    run = csvs / "run"
    assert main(["fit", "gppl", *_files(csvs), "--ties", "drop", "--method", "natgrad", "--max-iter", "7",
                 "--tol", "1e-12", "--batch-size", "50", "--no-progress", "--out", str(run)]) == 0
    post = cz.load(run / "posterior.pt")
    assert post.settings["iterations"] == 7 and post.settings["batch_size"] == 50


def test_help_and_argument_errors_do_not_import_torch():
    code = ("import sys\nfrom crowdzoo.cli import main\n"
            "for argv in (['fit', '--help'], ['fit', 'gppl', '--max-iter', 'x']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert "--max-iter" in done.stdout and "invalid int value: 'x'" in done.stderr


def test_fit_warnings_reach_stderr_as_one_line_each(csvs, capsys):
    assert main(["fit", "gppl", *_files(csvs), "--ties", "drop", "--method", "natgrad", "--max-iter", "3",
                 "--tol", "1e-12", "--no-progress", "--out", str(csvs / "run")]) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    warned = [ln for ln in lines if ln.startswith("crowdzoo: warning:")]
    assert any("--max-iter 3" in ln and "max_iter" not in ln for ln in warned), lines
    assert not [ln for ln in lines if "warnings.warn" in ln or "Warning:" in ln]
