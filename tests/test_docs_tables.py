"""Every Markdown table in docs/ and README.md is a table once rendered: its header has as many
cells as its separator row (a literal pipe in a header, as in ``|P - P_nuts|``, must be escaped, or
the page shows no table at all), and the comparisons write their headers escaped."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


def cells(line: str) -> int:
    """Cells of a Markdown table row: split on pipes that are not escaped."""
    return len(re.split(r"(?<!\\)\|", line.strip().strip("|")))


def tables(text: str):
    lines = text.splitlines()
    for i in range(1, len(lines)):
        if SEPARATOR.match(lines[i]) and lines[i - 1].startswith("|"):
            yield i, lines[i - 1], lines[i]


def test_every_docs_table_has_a_header_as_wide_as_its_separator():
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    bad = [f"{p.relative_to(ROOT)}:{i}: header {cells(h)} cells, separator {cells(s)}"
           for p in pages for i, h, s in tables(p.read_text(encoding="utf-8")) if cells(h) != cells(s)]
    assert not bad, "\n".join(bad)


def test_route_comparison_headers_are_escaped():
    from crowdzoo.comparisons.gppl_routes import summarise

    df = pd.DataFrame({"seed": [0], "route": ["svi"], "mean |P - P_nuts|": [0.01], "seconds": [1.0]})
    head, sep = summarise(df).splitlines()[:2]
    assert "\\|P - P_nuts\\|" in head and cells(head) == cells(sep) == 3
