"""crowdGPPL on choices (crowdzoo.models.crowdgppl.choices): two-item choices against the pairwise
model, and personal utilities recovered from a simulated crowd's best-of-4 choices."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from pyro import poutine

import crowdzoo as cz
from crowdzoo.data import ChoiceData
from crowdzoo.models import GPPL, CrowdGPPL
from crowdzoo.models.crowdgppl.posterior import CrowdGPPLPosterior

F64 = torch.float64


def _log_joint(model, data, values):
    fn, args = model.program(model.setup(data), data)
    return poutine.trace(poutine.condition(fn, data=values)).get_trace(*args).log_prob_sum()


def test_two_item_choices_are_the_pairwise_model():
    """Every item inducing and independent users: a label as a choice from {a, b} by its user has the
    pairwise model's log joint to 1e-10, and its predictions per draw the pairwise ones."""
    pairs, _ = cz.simulate_crowd(n_items=8, n_users=3, n_pairs=30, n_components=2, n_user_features=0, seed=2)
    sets = np.column_stack([pairs.a, pairs.b])
    choices = ChoiceData.from_arrays(sets, np.where(pairs.y == 1, pairs.a, pairs.b), pairs.item_features,
                                     users=pairs.users)
    model = CrowdGPPL(n_components=2, n_inducing=None, item_residual=False)
    g = torch.Generator().manual_seed(0)
    values = {"s_t": torch.tensor(0.7, dtype=F64), "u_t": torch.randn(8, generator=g, dtype=F64),
              "s_v": torch.tensor([1.2, 0.5], dtype=F64), "u_v": torch.randn(2, 8, generator=g, dtype=F64),
              "s_w": torch.tensor([0.8, 2.0], dtype=F64), "u_w": torch.randn(2, 3, generator=g, dtype=F64)}
    assert abs(float(_log_joint(model, pairs, values) - _log_joint(model, choices, values))) < 1e-10
    G = 20
    sites = {"s_t": torch.rand(G, generator=g, dtype=F64) + 0.5,
             "u_t": torch.randn(G, 8, generator=g, dtype=F64),
             "s_v": torch.rand(G, 2, generator=g, dtype=F64) + 0.5,
             "u_v": torch.randn(G, 2, 8, generator=g, dtype=F64),
             "s_w": torch.rand(G, 2, generator=g, dtype=F64) + 0.5,
             "u_w": torch.randn(G, 2, 3, generator=g, dtype=F64)}
    post = CrowdGPPLPosterior.from_draws(model, model.setup(pairs), pairs, sites, "svi")
    a, b, users = pairs.item_ids[pairs.a], pairs.item_ids[pairs.b], pairs.user_ids[pairs.users]
    p = post.predict_choice(np.column_stack([a, b]), users=users)
    assert np.allclose(p[:, 0], post.predict_proba(a, b, users=users), atol=1e-10, rtol=0)


def _crowd_choices(F, n_rows, k, item_features, seed):
    """Best-of-k choices by users drawn uniformly, each choosing by the probit on F[:, user]."""
    rng = np.random.default_rng(seed)
    N, U = F.shape
    sets = np.argsort(rng.uniform(size=(n_rows, N)), axis=1)[:, :k]
    users = rng.integers(0, U, n_rows)
    noisy = F[sets, users[:, None]] + rng.normal(0.0, np.sqrt(0.5), sets.shape)
    return ChoiceData.from_arrays(sets, sets[np.arange(n_rows), noisy.argmax(1)], item_features, users=users)


@pytest.mark.slow
def test_crowdgppl_svi_recovers_personal_utilities_from_choices():
    """A crowd of 6 users with two components of taste: crowdGPPL's svi fit to 400 best-of-4 choices
    finds each user's utilities (correlation with the simulated F) and predicts held-out choices
    better than pooled GPPL on the same choices, which has the consensus alone."""
    pairs, truth = cz.simulate_crowd(n_items=15, n_users=6, n_pairs=10, n_components=2, n_user_features=0,
                                     s_t=2.0, seed=5)
    X, F = pairs.item_features, truth["F"]
    data = _crowd_choices(F, 700, 4, X, seed=1)
    train, held = data.subset(np.arange(400)), data.subset(np.arange(400, 700))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cz.ConvergenceWarning)
        crowd = cz.fit(CrowdGPPL(n_components=2, n_inducing=None), train, method="svi", num_steps=1000,
                       n_draws=100, progress_bar=False, check_confidence=False)
        pooled = cz.fit(GPPL(n_inducing=None), train, method="svi", num_steps=1000, n_draws=100,
                        progress_bar=False, check_confidence=False)
    users = train.user_ids
    mean = crowd.utilities(users=users)[0].to_numpy()  # items × users
    r = [np.corrcoef(mean[:, u], F[:, u])[0, 1] for u in range(F.shape[1])]
    assert np.mean(r) > 0.85, r

    def log_loss(post, **kw):
        p = post.predict_choice([held.item_ids[row[row >= 0]] for row in held.sets], **kw)
        return -np.mean(np.log(p[np.arange(held.n_rows), held.best]))

    assert log_loss(crowd, users=held.user_ids[held.users]) < log_loss(pooled) - 0.05
