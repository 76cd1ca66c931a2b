"""Bradley–Terry's tiny example: 7 items and 40 pairs, and 30 best–worst choices among 3 or 4 of them,
fitted by every route in about a second."""
from __future__ import annotations

from ...data.simulate import simulate_gppl
from ...data.simulate_choices import simulate_choices
from ...zoo import Example
from .model import BradleyTerry


def tiny(seed: int = 0) -> Example:
    data, _ = simulate_gppl(n_items=7, n_pairs=40, n_features=2, seed=seed)
    choices, _ = simulate_choices(n_items=7, n_rows=30, k=3, n_features=0, link="logit", worst=True,
                                  seed=seed)
    return Example(BradleyTerry(), data, choices=choices)
