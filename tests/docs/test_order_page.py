"""docs/gppl.md's order-effect example runs as the page writes it and gives the figures it shows."""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "gppl.md"


def test_the_league_example_runs_and_says_what_the_page_says():
    text = PAGE.read_text()
    section = text[text.index("## An order effect"):]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    ns: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, "docs/gppl.md, An order effect", "exec"), ns)
    oe = ns["post"].order_effect()
    shown = re.search(r"\{'mean': ([\d.]+), 'sd': ([\d.]+), 'p_positive': ([\d.]+)\}", code)
    assert [round(oe[k], 3) for k in ("mean", "sd", "p_positive")] == [float(x) for x in shown.groups()]
    losses = re.search(r"# \(([\d.]+), ([\d.]+)\)", code).groups()
    plain = ns["plain"].predict_proba(ns["test"].home, ns["test"].away)
    assert ns["log_loss"](ns["p_home"]) == pytest.approx(float(losses[0]), abs=5e-4)
    assert ns["log_loss"](plain) == pytest.approx(float(losses[1]), abs=5e-4)
    assert (ns["p_home"] > ns["p_neutral"]).all()
