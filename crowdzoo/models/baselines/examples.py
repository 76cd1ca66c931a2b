"""The baselines' tiny examples: a crowd of 3 users (or workers), 7 items and 40 pairs, fitted in
about a second."""
from __future__ import annotations

from ...data.simulate import simulate_crowd
from ...zoo import Example
from .crowdbt_gp import CrowdBTGP
from .gppl_per_user import GPPLPerUser


def _crowd(seed: int):
    data, _ = simulate_crowd(n_items=7, n_users=3, n_pairs=40, n_components=2, n_user_features=0, seed=seed)
    return data


def gppl_per_user(seed: int = 0) -> Example:
    return Example(GPPLPerUser(n_inducing=5), _crowd(seed),
                   {"natgrad": dict(max_iter=6, tol=0, progress_bar=False)})


def crowdbt_gp(seed: int = 0) -> Example:
    return Example(CrowdBTGP(n_inducing=5), _crowd(seed), {"map": dict(max_iter=50)})
