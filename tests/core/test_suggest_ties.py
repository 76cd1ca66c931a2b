"""suggest on fits with ties (crowdzoo.core.suggest.TieQueries): BALD over the three outcomes against a
Monte-Carlo mutual information, the fantasy step's variance against grid conditioning on each outcome,
and suggest end to end on GPPL and crowdGPPL (a τ per user) fits with ties."""
from __future__ import annotations

import math

import numpy as np
import torch

import crowdzoo as cz
from crowdzoo.core.suggest import TieQueries, entropy3
from crowdzoo.gp.ordinal import outcome_log_probs
from crowdzoo.models import GPPL, CrowdGPPL

F64 = torch.float64


def _outcomes(tau):
    return lambda g, rows: outcome_log_probs(g, torch.as_tensor(tau, dtype=F64)).exp()


def test_bald_over_three_outcomes_matches_a_monte_carlo_mutual_information():
    g = torch.Generator().manual_seed(0)
    for mu, var, tau in ((0.0, 1.0, 0.5), (0.8, 0.5, 0.3), (-1.5, 3.0, 1.0), (0.3, 0.05, 0.8)):
        f = mu + math.sqrt(var) * torch.randn(400_000, generator=g, dtype=F64)
        p = outcome_log_probs(f, torch.tensor(tau, dtype=F64)).exp()
        mi = entropy3(p.mean(0)) - entropy3(p).mean()
        q = TieQueries(torch.tensor([mu]), torch.tensor([var]), None, _outcomes(tau))
        assert abs(float(q.scores("bald", np.random.default_rng(0))) - float(mi)) < 3e-3
    # at τ → 0 a tie has no mass: the two-outcome mutual information
    q0 = TieQueries(torch.tensor([0.4]), torch.tensor([1.2]), None, _outcomes(1e-9))
    p = outcome_log_probs(0.4 + math.sqrt(1.2) * torch.randn(400_000, generator=g, dtype=F64),
                          torch.tensor(0.0, dtype=F64)).exp()
    mi = entropy3(p.mean(0)) - entropy3(p).mean()
    assert abs(float(q0.scores("bald", np.random.default_rng(0))) - float(mi)) < 3e-3


def test_the_fantasy_step_averages_the_posterior_variance_over_three_outcomes():
    """g_q's variance after the fantasy step, v − κ v², against E_k[Var(g | k)] on a fine grid."""
    for mu, var, tau in ((0.2, 1.5, 0.6), (-1.0, 0.4, 1.2)):
        q = TieQueries(torch.tensor([mu], dtype=F64), torch.tensor([var], dtype=F64), None, _outcomes(tau))
        x = mu + math.sqrt(var) * torch.linspace(-10, 10, 40001, dtype=F64)
        prior = torch.exp(-0.5 * (x - mu) ** 2 / var)
        p = outcome_log_probs(x, torch.tensor(tau, dtype=F64)).exp()
        expected = 0.0
        for k in range(3):
            w = prior * p[:, k]
            m_k = (w * x).sum() / w.sum()
            expected += float(w.sum() / prior.sum()) * float((w * (x - m_k) ** 2).sum() / w.sum())
        assert abs((var - q.kappa(0) * var * var) - expected) < 1e-6


def test_suggest_on_fits_with_ties():
    data, _ = cz.simulate_gppl(n_items=8, n_pairs=60, seed=1, tau=0.6)
    post = cz.fit(GPPL(), data, method="natgrad", progress_bar=False, check_confidence=False)
    queries = post._queries(*cz.core.suggest.candidates(post.data.item_ids, None)[:2], None)
    assert isinstance(queries, TieQueries)
    for strategy in ("bald", "entropy", "thompson", "random"):
        df = post.suggest(4, strategy=strategy, seed=0)
        assert len(df) == 4 and not df.duplicated(["a", "b"]).any()
    crowd, _ = cz.simulate_crowd(n_items=8, n_users=3, n_pairs=90, n_components=1, n_user_features=0,
                                 tau=np.array([0.2, 0.6, 1.2]), seed=1)
    cpost = cz.fit(CrowdGPPL(n_components=1, n_inducing=None, tie_threshold="per_user"), crowd,
                   method="natgrad", progress_bar=False, check_confidence=False)
    df = cpost.suggest(5, seed=0)
    assert len(df) == 5 and set(df["user"]) <= set(crowd.user_ids)
