"""docs/guides/compare-routes.md's comparison of one's own, as the page writes it: its module in a
folder outside crowdzoo, its command (with --quick and two repeats, for time) and its Python."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "compare-routes.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", PAGE.read_text(), flags=re.S)


@pytest.mark.slow
def test_the_guides_own_comparison_runs_as_written(tmp_path, monkeypatch, capsys):
    from crowdzoo.cli import main

    module = next(b for b in blocks("python") if b.startswith("# my_guides.py"))
    command = next(b for b in blocks("bash") if "my_guides:my_guides" in b).split()
    assert command[:3] == ["crowdzoo", "compare", "my_guides:my_guides"]
    (tmp_path / "my_guides.py").write_text(module)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "my_guides", raising=False)
    args = [*command[1:], "--quick"]
    args[args.index("--repeats") + 1], args[args.index("--jobs") + 1] = "2", "1"
    assert main(args) == 0
    page = (tmp_path / "results" / "guides.md").read_text()
    df = pd.read_csv(tmp_path / "results" / "guides.csv")
    assert len(df) == 6 and "| MAP \\| point | AutoDelta |" in page
    for guide, rows in df.groupby("guide", sort=False):
        x = rows["held-out log loss"].to_numpy()
        assert f"{x.mean():.3f} ± {x.std(ddof=1):.3f}" in page, guide
    assert np.all(df.loc[df["guide"] == "MAP | point", "mean posterior sd"] < 1e-6)
    assert (tmp_path / "results" / "guides.tex").read_text().count("\\\\") == 4  # header and 3 rows

    python = next(b for b in blocks("python") if 'run("my_guides:my_guides"' in b)
    python = python.replace("repeats=5)", "repeats=2, quick=True)")
    exec(compile(python, str(PAGE), "exec"), {})
    assert "| MAP \\| point | AutoDelta |" in capsys.readouterr().out
    assert (tmp_path / "results" / "guides.md").read_text().startswith("Made by `python make_tables.py`.")
