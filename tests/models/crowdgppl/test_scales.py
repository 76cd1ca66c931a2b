"""The components' scale chosen from the data (crowdgppl/scales.py): on a dense survey panel whose
respondents differ, the held broad scale is chosen and predicts their held-out answers better; where
everyone shares one taste the weakly informative prior stays; a prior the user sets is never replaced."""
import warnings

import numpy as np
import pandas as pd
import pytest

import crowdzoo as cz
from crowdzoo.data.simulate_panel import Panel, simulate_panel
from crowdzoo.models.crowdgppl import scales


def _fit(panel, seed=0, **kw):
    train, test, items, _, _ = simulate_panel(panel, seed=seed)
    data = cz.PairwiseData.from_frame(train, items, a="winner", b="loser", y=None, user="taster")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = cz.fit(cz.CrowdGPPL(), data, seed=seed, **kw)
    p = np.asarray(post.predict_proba(test["winner"].to_numpy(), test["loser"].to_numpy(),
                                      users=test["taster"].to_numpy()))
    return post, float(-np.log(p).mean())


def test_a_dense_panel_of_differing_respondents_gets_the_held_scale():
    panel = Panel(n_items=6, n_users=150, all_pairs=True, features="none", taste="low-rank", personal=1.5)
    post, loss = _fit(panel)
    record = post.settings["scales"]
    assert record["choice"] == "held" and record["held_side"] == "items"
    assert post.model.rate_v0 == scales.HELD_RATE  # the posterior carries the model it fitted
    _, old = _fit(panel, select_scales=False)
    assert loss < old - 0.02  # on the respondents' own held-out answers, not the selection's split


def test_a_crowd_that_shares_one_taste_keeps_the_prior():
    panel = Panel(n_items=30, n_users=40, labels_per_user=20, taste="shared", personal=0.0, scale=0.6)
    post, _ = _fit(panel)
    assert post.settings["scales"]["choice"] == "prior"
    assert post.model == cz.CrowdGPPL()


def test_a_prior_the_user_sets_is_kept_and_said_so():
    panel = Panel(n_items=6, n_users=60, all_pairs=True, features="none")
    train, _, items, _, _ = simulate_panel(panel, seed=1)
    data = cz.PairwiseData.from_frame(train, items, a="winner", b="loser", y=None, user="taster")
    post = cz.fit(cz.CrowdGPPL(rate_v0=2.0), data, seed=0)
    assert post.settings["scales"] == {"choice": "prior", "skipped": "component priors given"}
    assert post.model.rate_v0 == 2.0


@pytest.mark.parametrize("users, items, side", [(200, 6, "v"), (10, 40, "w")])
def test_the_held_side_is_the_one_with_fewer_inducing_values(users, items, side):
    rng = np.random.default_rng(0)
    a = rng.integers(0, items, 300)
    frame = pd.DataFrame({"a": a, "b": (a + rng.integers(1, items, 300)) % items,
                          "y": rng.integers(0, 2, 300), "u": rng.integers(0, users, 300)})
    data = cz.PairwiseData.from_frame(frame, user="u")
    assert scales.held_side(cz.CrowdGPPL().setup(data)) == side


def test_held_without_a_choice_and_a_bad_setting_refused():
    panel = Panel(n_items=6, n_users=40, all_pairs=True, features="none")
    train, _, items, _, _ = simulate_panel(panel, seed=1)
    data = cz.PairwiseData.from_frame(train, items, a="winner", b="loser", y=None, user="taster")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = cz.fit(cz.CrowdGPPL(), data, seed=0, select_scales="held")
    assert post.settings["scales"]["choice"] == "held" and post.model.shape_v0 == scales.HELD_SHAPE
    with pytest.raises(cz.DataError, match="select_scales"):
        cz.fit(cz.CrowdGPPL(), data, seed=0, select_scales="sometimes")
