"""Every Markdown table in docs/ and README.md is a table once rendered: its header has as many
cells as its separator row (a literal pipe in a header, as in ``|P - P_nuts|``, must be escaped, or
the page shows no table at all), and the comparisons write their headers escaped — the zoo's own and
one's own, run as ``crowdzoo compare module:object``."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


def cells(line: str) -> int:
    """Cells of a Markdown table row: split on pipes that are not escaped."""
    return len(re.split(r"(?<!\\)\|", line.strip().strip("|")))


def tables(text: str):
    lines = text.splitlines()
    for i in range(1, len(lines)):
        if SEPARATOR.match(lines[i]) and lines[i - 1].startswith("|"):
            yield i, lines[i - 1], lines[i]


def body(text: str, i: int):
    """The rows (line number, line) of the table whose separator is line ``i``."""
    lines = text.splitlines()
    j = i + 1
    while j < len(lines) and lines[j].startswith("|"):
        yield j, lines[j]
        j += 1


def test_every_docs_table_has_a_header_as_wide_as_its_separator():
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    bad = [f"{p.relative_to(ROOT)}:{i}: header {cells(h)} cells, separator {cells(s)}"
           for p in pages for i, h, s in tables(p.read_text(encoding="utf-8")) if cells(h) != cells(s)]
    assert not bad, "\n".join(bad)


def test_every_row_of_a_docs_table_is_as_wide_as_its_header():
    """A pipe or a line break inside a cell, unescaped, would split the row or end the table."""
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    bad = [f"{p.relative_to(ROOT)}:{j + 1}: {cells(row)} cells, header {cells(h)}"
           for p in pages for text in [p.read_text(encoding="utf-8")] for i, h, _ in tables(text)
           for j, row in body(text, i) if cells(row) != cells(h)]
    assert not bad, "\n".join(bad)


def test_route_comparison_headers_are_escaped():
    from crowdzoo.comparisons.gppl_routes import summarise

    df = pd.DataFrame({"seed": [0], "route": ["svi | mine"], "mean |P - P_nuts|": [0.01], "seconds": [1.0]})
    head, sep, row = summarise(df).splitlines()[:3]
    assert "\\|P - P_nuts\\|" in head and cells(head) == cells(sep) == cells(row) == 3


MY_COMPARISON = '''
import pandas as pd

def run_one(seed, quick=False):
    return pd.DataFrame({"seed": [seed], "route": ["mine"], "max |P - P_nuts|": [0.1 * (seed + 1)]})

def summarise(df):
    from crowdzoo.comparisons.gppl_routes import summarise as table
    return table(df)
'''


def test_compare_runs_ones_own_comparison_by_module_and_object(tmp_path, monkeypatch, capsys):
    """``crowdzoo compare module:object`` runs a comparison the zoo does not list, from a module file
    in the working folder, and writes its page and tidy CSV like the zoo's own."""
    from crowdzoo.cli import main

    (tmp_path / "my_guides.py").write_text(MY_COMPARISON)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command puts the working folder on it
    for name in ("my_guides", "cmp"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert main(["compare", "my_guides:__dict__", "--repeats", "1"]) == 2  # a dict is no comparison
    assert "has no run_one or summarise" in capsys.readouterr().err
    out = tmp_path / "page.md"
    (tmp_path / "cmp.py").write_text("import my_guides as CMP\n")
    assert main(["compare", "cmp:CMP", "--repeats", "2", "--out", str(out)]) == 0
    page = out.read_text()
    assert page.startswith("Made by `crowdzoo compare cmp:CMP --repeats 2 --jobs 1 --out")
    assert "\\|P - P_nuts\\|" in page and "0.150 ± 0.071" in page
    assert len(pd.read_csv(out.with_suffix(".csv"))) == 2
    tex = out.with_suffix(".tex").read_text()
    assert tex.startswith("\\begin{tabular}") and "|P - P\\_nuts|" in tex and "0.150 ± 0.071" in tex
    assert main(["compare", "no_such_thing"]) == 2
    assert "or name your own as module:attribute" in capsys.readouterr().err


LATEX_PAGE = r"""Some text.

| route | mean \|P - P_nuts\| | n | note |
|---|---:|:---:|---|
| **svi** | 0.12 | 5 | 50% of x & y |
| ep | 0.01 | 7 | $ # {} ~ |

Between the tables.

| a | b |
|---|---|
| 1 | 2 |
"""


def test_markdown_tables_become_latex_tabulars():
    """Each pipe table of a page becomes a booktabs tabular: alignment from the separator row, an
    escaped pipe a pipe inside its cell, LaTeX's special characters escaped, bold marks dropped, the
    prose between tables left out."""
    from crowdzoo.comparisons.markdown import latex_tables

    tex = latex_tables(LATEX_PAGE)
    first, second = tex.strip().split("\n\n")
    assert first.splitlines() == [
        r"\begin{tabular}{lrcl}", r"\toprule", r"route & mean |P - P\_nuts| & n & note \\", r"\midrule",
        r"svi & 0.12 & 5 & 50\% of x \& y \\", r"ep & 0.01 & 7 & \$ \# \{\} \textasciitilde{} \\",
        r"\bottomrule", r"\end{tabular}"]
    assert second.splitlines()[0] == r"\begin{tabular}{ll}" and r"1 & 2 \\" in second
    assert "Some text" not in tex and latex_tables("no table here") == ""
