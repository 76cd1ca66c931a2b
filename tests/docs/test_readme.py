"""The README's Python snippets run, top to bottom in one namespace, each in under a minute."""
from __future__ import annotations

import re
import time
import warnings
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_snippets_run_in_under_a_minute_each(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 4
    monkeypatch.chdir(tmp_path)  # the snippets write files (gppl.pt, report.html)
    ns: dict = {}
    import crowdzoo as cz

    ns["cz"] = cz
    for i, code in enumerate(blocks):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(code, f"README.md python block {i}", "exec"), ns)
        seconds = time.perf_counter() - t0
        assert seconds < 60, f"README python block {i} took {seconds:.0f} s"


def test_the_docs_first_fit_converges_and_its_report_does_not_fail(tmp_path, monkeypatch):
    """The docs' first example fits to convergence, so its report does not say "optimisation converged:
    fail" to a reader's first try."""
    page = README.parent / "docs" / "index.md"
    code = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)[0]
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, "docs/index.md first fit", "exec"), ns)
    import crowdzoo as cz

    rep = cz.report(ns["post"], tmp_path / "r.md", test=ns["test"])
    checks = {c.name: c.verdict for c in rep.checks}
    assert checks["optimisation converged"] == "pass" and rep.verdict != "fail"
