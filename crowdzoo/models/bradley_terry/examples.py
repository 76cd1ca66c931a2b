"""Bradley–Terry's tiny example: 7 items and 40 pairs, fitted by every route in about a second."""
from __future__ import annotations

from ...data.simulate import simulate_gppl
from ...zoo import Example
from .model import BradleyTerry


def tiny(seed: int = 0) -> Example:
    data, _ = simulate_gppl(n_items=7, n_pairs=40, n_features=2, seed=seed)
    return Example(BradleyTerry(), data)
