"""The survey shapes of the simulated panels: every pair asked, categorical respondent covariates."""
import numpy as np
import pandas as pd

from crowdzoo.data.simulate_panel import Panel, simulate_panel


def test_all_pairs_asks_every_user_every_pair_once():
    panel = Panel(n_items=6, n_users=40, all_pairs=True, features="none", tie_rate=0.1)
    train, test, items, users, truth = simulate_panel(panel, seed=3)
    labels = pd.concat([train, test])
    pairs = labels.apply(lambda r: frozenset((r["winner"], r["loser"])), axis=1)
    per_user = pairs.groupby(labels["taster"]).agg(lambda s: (len(s), s.nunique()))
    assert all(n == 15 and k == 15 for n, k in per_user)
    assert len(per_user) == 40
    held = test.groupby("taster").size()
    assert (held == 3).all()  # a fifth of each respondent's 15 answers


def test_covariates_are_categorical_and_shared_and_can_carry_taste():
    panel = Panel(n_items=6, n_users=300, all_pairs=True, features="none", covariates=5)
    _, _, _, users, truth = simulate_panel(panel, seed=0)
    cols = [c for c in users.columns if c != "barista"]
    assert cols == ["gender", "age_band", "region", "education", "urban"]
    assert not any(pd.api.types.is_numeric_dtype(users[c]) for c in cols)
    shared = users[cols].duplicated(keep=False).mean()
    assert shared > 0.5  # many respondents share their covariate vector, as in real panels
    # with covariate_taste the covariates decide part of each respondent's utilities: the mean
    # utilities of the covariate groups differ far more than without it
    spread = {}
    for taste in (0.0, 2.0):
        _, _, _, users, truth = simulate_panel(Panel(n_items=6, n_users=300, all_pairs=True,
                                                     features="none", covariates=5, covariate_taste=taste,
                                                     personal=0.0), seed=0)
        F = truth["F"]
        group_means = np.stack([F[:, (users["region"] == g).to_numpy()].mean(1)
                                for g in users["region"].unique()])
        spread[taste] = group_means.std(0).mean()
    assert spread[2.0] > 3 * spread[0.0]
