"""``crowdzoo compare guides MODEL --guides PATH,PATH``: guides named by import path (one of them in a
user's module outside crowdzoo) fitted by svi and judged against NUTS on the model's tiny example."""
from __future__ import annotations

import re
import sys

import pandas as pd
import pytest

from crowdzoo.cli import main
from crowdzoo.comparisons import guides
from crowdzoo.errors import DataError

MODULE = '''
from pyro.infer.autoguide import AutoLowRankMultivariateNormal


def low_rank(model):
    return AutoLowRankMultivariateNormal(model, rank=2)
'''


@pytest.fixture
def user_guides(tmp_path, monkeypatch):
    (tmp_path / "user_guides.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.delitem(sys.modules, "user_guides", raising=False)
    return tmp_path


@pytest.mark.slow
def test_a_guide_sweep_by_import_paths_through_the_command_line(user_guides, capsys):
    """A point guide (AutoDelta) has no spread: sd ratio 0 and no NUTS draw inside its interval; the
    user's low-rank Gaussian, recorded by name and rank, has a spread near NUTS's."""
    out = user_guides / "guides.md"
    paths = "pyro.infer.autoguide:AutoDelta,user_guides:low_rank"
    assert main(["compare", "guides", "bradley-terry", "--guides", paths, "--quick", "--out", str(out)]) == 0
    page = out.read_text()
    assert page.startswith(f"Made by `crowdzoo compare guides bradley-terry --guides {paths} --repeats 1")
    df = pd.read_csv(out.with_suffix(".csv"))
    assert set(df["guide"]) == set(paths.split(","))
    delta = df[df["guide"] == "pyro.infer.autoguide:AutoDelta"]
    low = df[df["guide"] == "user_guides:low_rank"]
    assert (delta["recorded"] == "AutoDelta").all()
    assert (low["recorded"] == "AutoLowRankMultivariateNormal(rank=2)").all()
    f_delta, f_low = delta[delta["variable"] == "f"].iloc[0], low[low["variable"] == "f"].iloc[0]
    assert f_delta["sd ratio"] < 1e-9 and f_delta["NUTS in 90 %"] == 0
    assert 0.3 < f_low["sd ratio"] < 1.5 and f_low["NUTS in 90 %"] > 0.4
    assert re.search(r"\| user_guides:low_rank \| AutoLowRankMultivariateNormal\(rank=2\) \| f \|", page)
    assert out.with_suffix(".tex").read_text().startswith("\\begin{tabular}")


def test_a_guide_sweep_refuses_what_it_cannot_run(user_guides, capsys):
    with pytest.raises(DataError, match="model: scdc has no nuts route"):
        guides.sweep(["default"], model="scdc")
    with pytest.raises(DataError, match="cannot load 'user_guides:nothing'"):  # before any fit
        guides.sweep(["user_guides:nothing"], model="gppl")
    assert main(["compare", "guides", "gppl"]) == 2
    assert "--guides: name the guides" in capsys.readouterr().err
    assert main(["compare", "gppl-routes", "--guides", "default"]) == 2
    assert "an option of `crowdzoo compare guides` alone" in capsys.readouterr().err
    assert main(["compare", "gppl-routes", "gppl"]) == 2
    assert "takes no model" in capsys.readouterr().err
