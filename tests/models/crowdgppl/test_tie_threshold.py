"""crowdGPPL with a tie threshold per user (tie_threshold="per_user"): thresholds recovered from a
simulated crowd whose users call ties at different margins, by natgrad and svi, and held-out three-way
predictions against one threshold for the crowd."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import crowdzoo as cz
from crowdzoo.models import CrowdGPPL

TAU = np.array([0.2, 0.6, 1.0, 1.6])


def _crowd(n_pairs=2400):
    data, _ = cz.simulate_crowd(n_items=20, n_users=4, n_pairs=n_pairs, n_components=1, n_user_features=0,
                                tau=TAU, seed=0)
    return data


def _log_loss(post, held):
    p = post.outcome_probs(held.item_ids[held.a], held.item_ids[held.b], users=held.user_ids[held.users])
    k = np.round(2 * held.y).astype(int)  # (b ≻ a, tie, a ≻ b)
    p = p.numpy()[:, ::-1]  # outcome_probs is (p_a, p_tie, p_b)
    return -np.mean(np.log(p[np.arange(held.n_pairs), k]))


def test_natgrad_recovers_each_users_threshold_and_predicts_better_than_one():
    data = _crowd()
    train, held = data.subset(np.arange(1600)), data.subset(np.arange(1600, 2400))
    kw = dict(method="natgrad", progress_bar=False, check_confidence=False)
    per_user = cz.fit(CrowdGPPL(n_components=1, n_inducing=None, tie_threshold="per_user"), train, **kw)
    crowd = cz.fit(CrowdGPPL(n_components=1, n_inducing=None), train, **kw)
    tau = per_user.tau[0].numpy()
    assert tau.shape == (4,) and np.all(np.abs(tau - TAU) < 0.2 * TAU + 0.1), tau
    assert crowd.tau.shape == (1,)
    assert _log_loss(per_user, held) < _log_loss(crowd, held) - 0.02
    p = per_user.outcome_probs(held.item_ids[held.a], held.item_ids[held.b]).numpy()  # the consensus
    assert np.allclose(p.sum(1), 1.0)


@pytest.mark.slow
def test_svi_recovers_each_users_threshold():
    data = _crowd(1600)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cz.ConvergenceWarning)
        model = CrowdGPPL(n_components=1, n_inducing=None, tie_threshold="per_user")
        post = cz.fit(model, data, method="svi", num_steps=1500, n_draws=200, progress_bar=False,
                      check_confidence=False)
    tau = post.tau.mean(0).numpy()
    assert post.tau.shape == (200, 4) and np.all(np.abs(tau - TAU) < 0.25 * TAU + 0.1), tau
    idata = post.to_arviz(n_draws=50)
    assert idata["log_likelihood"]["y"].shape[-1] == data.n_pairs


def test_tie_threshold_is_checked():
    with pytest.raises(cz.DataError, match="tie_threshold"):
        CrowdGPPL(tie_threshold="user")
