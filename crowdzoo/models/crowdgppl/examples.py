"""crowdGPPL's tiny example: a crowd of 3 users, 7 items and 40 pairs drawn from crowdGPPL itself, two
components and 5 inducing items, fitted by every route in about a second; and 30 choices among 3 of
7 items by 3 users (a GP draw shared by the crowd plus each user's own taste, the probit choice)."""
from __future__ import annotations

import numpy as np

from ...data.choices import ChoiceData
from ...data.simulate import simulate_crowd
from ...data.simulate_choices import simulate_choices
from ...zoo import Example
from .model import CrowdGPPL


def tiny(seed: int = 0) -> Example:
    data, _ = simulate_crowd(n_items=7, n_users=3, n_pairs=40, n_components=2, n_user_features=0, seed=seed)
    choices, f = simulate_choices(n_items=7, n_rows=30, k=3, n_features=2, seed=seed)
    rng = np.random.default_rng(seed)
    users = np.repeat(np.arange(3), 10)
    f_user = f + rng.normal(0.0, 0.7, (3, 7))  # a taste of each user's own beside the shared one
    utility = f_user[users[:, None], choices.sets] + rng.normal(0.0, np.sqrt(0.5), choices.sets.shape)
    chosen = choices.sets[np.arange(30), utility.argmax(1)]
    choices = ChoiceData.from_arrays(choices.sets, chosen, choices.item_features, users=users)
    return Example(CrowdGPPL(n_components=2, n_inducing=5, n_inducing_users=None), data,
                   {"natgrad": dict(max_iter=8, tol=0, progress_bar=False)}, choices=choices)
