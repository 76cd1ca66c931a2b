"""The teaching notebooks run top to bottom (fast mode here, full under `make test-slow`), their
.ipynb match their jupytext scripts, and the docs site builds with --strict."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest
from test_docs_tables import tables

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.py"))


def _run(script: Path, tmp_path: Path, fast: bool):
    env = dict(os.environ, MPLBACKEND="Agg", CROWDZOO_FAST="1" if fast else "0")
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_there_are_six_notebooks():
    assert {p.stem for p in NOTEBOOKS} == {"gppl_from_scratch", "crowdgppl_simulated_crowd",
                                           "diagnosing_a_posterior", "communities_of_taste",
                                           "clustering_with_a_noisy_crowd", "which_pair_next"}


@pytest.mark.parametrize("script", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_in_fast_mode(script, tmp_path):
    _run(script, tmp_path, fast=True)


@pytest.mark.slow
@pytest.mark.parametrize("script", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_in_full(script, tmp_path):
    _run(script, tmp_path, fast=False)


@pytest.mark.parametrize("script", NOTEBOOKS, ids=lambda p: p.stem)
def test_ipynb_is_in_sync_with_its_script(script):
    ipynb = script.with_suffix(".ipynb")
    assert ipynb.is_file(), f"{ipynb.name} missing: run `make notebooks`"
    a, b = jupytext.read(script), jupytext.read(ipynb)
    assert [(c.cell_type, c.source) for c in a.cells] == [(c.cell_type, c.source) for c in b.cells], \
        f"{ipynb.name} is out of date: run `make notebooks`"


def test_docs_site_builds_strict(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f",
                          str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    # the API reference is generated from the docstrings: every model's routes, the engines, the core
    api = {p: (tmp_path / "site" / "api" / p / "index.html").read_text()
           for p in ("models", "inference", "core")}
    assert all(f in api["models"] for f in ("fit_ep", "fit_natgrad", "BradleyTerryPosterior"))
    assert "fit_svi" in api["inference"] and "StopRule" in api["inference"]
    assert "Posterior" in api["core"] and "SparseGP" in api["core"]
    # every Markdown table of the pages (comparison tables included) is a table on the built site: a
    # cell with an unescaped | would end the table there
    short = {}
    for md in sorted((ROOT / "docs").rglob("*.md")):
        rel = md.relative_to(ROOT / "docs")
        if rel.parts[0] == "api":
            continue
        page = rel.with_name("index.html") if rel.name == "index.md" else rel.with_suffix("") / "index.html"
        built = (tmp_path / "site" / page).read_text().count("<table")
        written = len(list(tables(md.read_text())))
        if built < written:
            short[str(rel)] = (written, built)
    assert not short, f"pages whose tables did not render (in Markdown, built): {short}"

