"""GPPL's tiny example: 7 items and 40 pairs drawn from GPPL itself, and 30 choices among 3 of them
(the probit choice on a GP draw), fitted by every route in about a second with the quick settings
below (the tests' round trip of every route reads it)."""
from __future__ import annotations

from ...data.simulate import simulate_gppl
from ...data.simulate_choices import simulate_choices
from ...zoo import Example
from .model import GPPL


def tiny(seed: int = 0) -> Example:
    data, _ = simulate_gppl(n_items=7, n_pairs=40, n_features=2, seed=seed)
    choices, _ = simulate_choices(n_items=7, n_rows=30, k=3, n_features=2, seed=seed)
    return Example(GPPL(), data, {"natgrad": dict(max_iter=8, tol=0, progress_bar=False),
                                  "ep": dict(n_grid=3, max_iter=30)}, choices=choices)
