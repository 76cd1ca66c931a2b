"""A comparison of one's own (a ``Comparison``: settings → rows) in a module outside crowdzoo, run by
its import path through the command line and the API: a Markdown table whose cells stay cells (a
pipe and a line break in a label escaped), the tidy rows as CSV, the tables as LaTeX, and each
measure's mean ± sd over the repeats as numpy computes it from the same draws."""
from __future__ import annotations

import re
import sys

import numpy as np
import pandas as pd
import pytest

import crowdzoo as cz
from crowdzoo.comparisons import Comparison, run
from crowdzoo.comparisons.markdown import _split_row, cell, markdown_table
from crowdzoo.errors import DataError

#: a user's module: two settings, one labelled with a pipe and a line break; each row's measures are
#: seeded normal draws whose mean is the setting's
MODULE = '''
import numpy as np
from crowdzoo import Comparison


def rows(loc, seed, quick=False):
    x = np.random.default_rng([seed, int(10 * loc)]).normal(loc, 1.0, size=2)
    return {"error": float(x[0]), "|P - P_nuts|": float(abs(x[1])), "note": "n=2" if quick else "n=2"}


my_guides = Comparison(rows, settings={"diag | mean-field": 1.0, "full\\nrank": 3.0}, column="guide")
'''
LABELS = {"diag | mean-field": 1.0, "full\nrank": 3.0}


def expected(loc: float, repeats: int) -> np.ndarray:
    """The (repeats, 2) draws of ``rows`` above, drawn again here."""
    return np.array([np.random.default_rng([s, int(10 * loc)]).normal(loc, 1.0, size=2)
                     for s in range(repeats)])


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """``my_guides.py`` in a temporary folder outside crowdzoo, importable as ``my_guides``."""
    (tmp_path / "my_guides.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.delitem(sys.modules, "my_guides", raising=False)
    return tmp_path


def table_rows(markdown: str) -> list[list[str]]:
    """The rows of the (one) pipe table of ``markdown``, split as a Markdown renderer splits them:
    on pipes not escaped by a backslash."""
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])] for line in lines]


def check_page(markdown: str, repeats: int) -> None:
    rows = table_rows(markdown)
    assert len({len(r) for r in rows}) == 1, "every row as wide as the header"
    head, body = rows[0], rows[2:]
    assert head == ["guide", "note", "error", "\\|P - P_nuts\\|"]  # the labels, then the measures
    assert [r[0] for r in body] == ["diag \\| mean-field", "full<br>rank"]
    for r, loc in zip(body, LABELS.values()):
        x = expected(loc, repeats)
        for col, values in ((2, x[:, 0]), (3, np.abs(x[:, 1]))):
            assert r[col] == f"{values.mean():.3f} ± {values.std(ddof=1):.3f}"
        assert r[1] == "n=2"


def test_ones_own_comparison_by_import_path_through_the_api(user_module):
    result = run("my_guides:my_guides", repeats=3)
    df, markdown = result  # a Result unpacks as the frame and the page
    assert markdown.startswith("Mean ± sd over 3 repeats.")
    check_page(markdown, 3)
    assert list(df.columns) == ["seed", "guide", "error", "|P - P_nuts|", "note"]
    assert df["guide"].tolist() == list(LABELS) * 3 and df["seed"].tolist() == [0, 0, 1, 1, 2, 2]
    tex = result.latex.splitlines()
    assert tex[0] == r"\begin{tabular}{llrr}"
    assert tex[2] == r"guide & note & error & |P - P\_nuts| \\"
    assert tex[4].startswith("diag | mean-field & ") and tex[5].startswith("full rank & ")
    assert pd.read_csv(__import__("io").StringIO(result.csv()))["guide"].tolist() == list(LABELS) * 3
    # in worker processes the comparison is loaded by its path there: the same table
    assert run("my_guides:my_guides", repeats=3, jobs=2).markdown == markdown


def test_ones_own_comparison_by_import_path_through_the_command_line(user_module, capsys):
    from crowdzoo.cli import main

    out = user_module / "tables" / "guides.md"
    assert main(["compare", "my_guides:my_guides", "--repeats", "2", "--out", str(out)]) == 0
    page = out.read_text()
    assert page.startswith("Made by `crowdzoo compare my_guides:my_guides --repeats 2 --jobs 1 --out ")
    check_page(page, 2)
    assert check_page(capsys.readouterr().out, 2) is None
    csv = pd.read_csv(out.with_suffix(".csv"))
    assert len(csv) == 4 and csv["guide"].tolist() == list(LABELS) * 2
    np.testing.assert_allclose(csv["error"][csv["guide"] == "full\nrank"], expected(3.0, 2)[:, 0])
    tex = out.with_suffix(".tex").read_text()
    assert "diag | mean-field & " in tex and "|P - P\\_nuts|" in tex
    assert main(["compare", "my_guides:nothing"]) == 2
    assert "cannot load 'my_guides:nothing'" in capsys.readouterr().err
    assert main(["compare", "my_guides:np"]) == 2  # a module that is no comparison
    assert "has no run_one or summarise" in capsys.readouterr().err


def test_cells_escape_pipes_and_line_breaks():
    assert cell("a|b\r\nc\nd") == "a\\|b<br>c<br>d"
    frame = pd.DataFrame({"x | y": ["1|2", "3\n4"], "n": [1, 2]})
    lines = markdown_table(frame, right={"n"}).splitlines()
    assert lines[1] == "|---|---:|"
    assert [_split_row(line) for line in lines[2:]] == [["1|2", "1"], ["3<br>4", "2"]]


def test_rows_may_be_a_row_rows_or_a_frame_and_bad_ones_are_refused():
    def rows(kind, seed):
        return {"one": {"m": seed}, "two": [{"m": seed}, {"m": seed + 10}],
                "frame": pd.DataFrame({"m": [seed]}), "bad": 3.0}[kind]

    good = Comparison(rows, {k: k for k in ("one", "two", "frame")}, column="kind")
    df = good.run_one(4)
    assert df["kind"].tolist() == ["one", "two", "two", "frame"] and df["m"].tolist() == [4, 4, 14, 4]
    with pytest.raises(DataError, match="rows: setting 'bad' gave a float"):
        Comparison(rows, {"bad": "bad"}).run_one(0)
    with pytest.raises(DataError, match="settings: empty"):
        Comparison(rows, {})
    with pytest.raises(DataError, match="rows: expected a function"):
        Comparison("rows")


def test_the_zoos_comparisons_are_comparisons():
    """Every comparison of the zoo's registry is wrapped as a Comparison that keeps its page, figure
    and data folder."""
    from crowdzoo.comparisons import REGISTRY, as_comparison, sbc, scdc

    for name, obj in REGISTRY.items():
        c = as_comparison(name)
        assert isinstance(c, cz.Comparison) and c.summary == obj.summarise, name
    assert as_comparison("sbc").figure == sbc.figure
    assert as_comparison("scdc-mnist").needs_data_dir and not as_comparison("scdc-digits").needs_data_dir
    assert as_comparison(scdc.digits).rows == scdc.digits.run_one
