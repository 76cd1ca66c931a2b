"""collabGP's learned output scales (``learn_scale``, the default) against the paper's unit scales.

On a crowd whose labels are noisy (utilities of sd 0.6 on the probit scale, a taste the users share),
the paper's prior on H — D = 20 latent functions of unit amplitude — expects labels near certain, and
EP–VB keeps predicting them so (held-out log loss .658 here, against the truth's own .550 and a coin's
.693); with learned scales the log loss comes within 0.04 of the truth's (.581), and the scales prune
the functions the crowd does not need.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import crowdzoo as cz
from crowdzoo.data.simulate_panel import Panel, simulate_panel


@pytest.fixture(scope="module")
def noisy_crowd():
    train, test, items, users, truth = simulate_panel(
        Panel(n_items=30, n_users=30, labels_per_user=30, scale=0.6, taste="shared", test_fraction=0.5),
        seed=0)
    data = cz.PairwiseData.from_frame(train, pd.get_dummies(items, dtype=float), a="winner", b="loser",
                                      y=None, tie="tie", ties="half", user="taster")
    held = test[test["tie"] == "no"]
    return data, held, truth["oracle"]


def _log_loss(post, held) -> float:
    p = post.predict_proba(held["winner"].to_numpy(), held["loser"].to_numpy(),
                           users=held["taster"].to_numpy())
    return float(-np.log(np.clip(p, 1e-12, 1.0)).mean())


def test_learned_scales_reach_the_oracle_on_a_noisy_crowd(noisy_crowd):
    data, held, oracle = noisy_crowd
    post = cz.fit(cz.CollabGP(), data, method="ep", progress_bar=False)
    ll = _log_loss(post, held)
    print(f"oracle {oracle:.3f}, learned scales {ll:.3f}")
    assert ll < oracle + 0.04 < np.log(2.0)
    # a few latent functions carry g; the rest are pruned to the prior's E[s_d] = α₀/β₀ = 10³
    inv_s = 1.0 / post.state.scales.mean
    assert int((inv_s > 1e-2).sum()) <= 3 and float(inv_s.min()) < 2e-3
    # and the posterior predicts with them: 1/E[s_d] is each h_d's prior variance (FITC's δ/s_d)
    torch.testing.assert_close(post.h_scale[0], inv_s)


def test_paper_settings_are_one_argument_away():
    paper = cz.CollabGP.paper()
    assert (paper.n_latent, paper.learn_scale, paper.lengthscale, paper.user_lengthscale) == (
        20, False, "median distance", "median distance")
    assert (paper.n_pseudo_pairs, paper.n_pseudo_users) == (25, 25)
    assert cz.CollabGP.paper(n_latent=5).n_latent == 5
    assert cz.CollabGP().learn_scale and cz.CollabGP().n_latent == 20
    assert cz.CollabGP.paper().setup(_tiny(), seed=0).scale_prior is None


def _tiny():
    data, _ = cz.simulate_collab(n_items=5, n_users=6, n_latent=2, seed=0)
    return data


def test_learned_scales_through_svi():
    """The svi route samples s_d (site "s_h", its guide started at D/2) and predicts with each draw's
    scales."""
    data = _tiny()
    post = cz.fit(cz.CollabGP(n_latent=2), data, method="svi", num_steps=300, lr=0.03, n_draws=40,
                  progress_bar=False)
    assert post.h_scale.shape == (40, 2) and bool((post.h_scale > 0).all())
    p = post.predict_proba(data.item_ids[data.a], data.item_ids[data.b], users=data.user_ids[data.users])
    assert np.isfinite(p).all() and np.mean((p > 0.5) == (data.y > 0.5)) > 0.6
