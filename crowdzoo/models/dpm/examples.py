"""The DPM's tiny example: a crowd of 3 users, 7 items and 40 pairs, fitted by every route in about a
second."""
from __future__ import annotations

from ...data.simulate import simulate_crowd
from ...zoo import Example
from .model import DPMCommunities


def tiny(seed: int = 0) -> Example:
    data, _ = simulate_crowd(n_items=7, n_users=3, n_pairs=40, n_components=2, n_user_features=0, seed=seed)
    return Example(DPMCommunities(), data, {"gibbs": dict(n_sweeps=6, burn_in=2, progress_bar=False)})
