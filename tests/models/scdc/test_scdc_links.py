"""SCDC's q(z) with the annotations' messages: the sweeps' fixed point is the stationary point of the
ELBO's part in q(z), and on groups the features alone cannot separate the links lift SCDC over its own
fit without them and over the best any classifier of the features can do."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import crowdzoo as cz
from crowdzoo.cluster_metrics import hungarian_accuracy
from crowdzoo.comparisons.scdc_crowd import overlapping_groups
from crowdzoo.data.simulate_links import two_coin_workers
from crowdzoo.models.scdc.model import Globals, Graph, graph_q, two_coin_loglik

pytestmark = pytest.mark.usefixtures("one_thread")


def _z_objective(theta, log_q_enc, graph: Graph, g: Globals):
    """The part of the ELBO in q(z) = softmax(θ) with the encoder's log q_φ standing in for each item's
    own term: Σ_n Σ_k q_nk (log q_φ,nk − log q_nk) + Σ_a [s_a log p(L_a | same) + (1 − s_a) log p(L_a |
    different)], s_a = Σ_k q_ik q_jk."""
    log_q = torch.log_softmax(theta, -1)
    q = log_q.exp()
    s = (q[graph.i] * q[graph.j]).sum(-1)
    same, diff = two_coin_loglik(graph.L, g.alpha_logit[graph.w], g.beta_logit[graph.w])
    return (q * (log_q_enc - log_q)).sum() + (s * same + (1 - s) * diff).sum()


def test_sweeps_reach_the_stationary_point_of_the_elbo_in_q_z():
    """On a random graph of 30 items and 60 annotations by 3 workers, the sweeps' fixed point (200
    sweeps) has a zero gradient of the objective in q(z) (autograd, not the update's algebra); the
    fixed point with the messages' sign flipped does not."""
    gen = torch.Generator().manual_seed(0)
    N, K, A = 30, 3, 60
    log_q_enc = torch.log_softmax(torch.randn(N, K, generator=gen, dtype=torch.float64), -1)
    i = torch.randint(N, (A,), generator=gen)
    j = (i + 1 + torch.randint(N - 1, (A,), generator=gen)) % N
    w = torch.randint(3, (A,), generator=gen)
    L = torch.randint(2, (A,), generator=gen).double()
    g = Globals(None, None, None, torch.tensor([0.8, 0.4, 0.6], dtype=torch.float64),
                torch.tensor([0.5, 0.7, 0.3], dtype=torch.float64))
    graph = Graph(i, j, w, L, None)

    def grad_at(q):
        theta = torch.log(q).clone().requires_grad_()
        _z_objective(theta, log_q_enc, graph, g).backward()
        return theta.grad.abs().max().item()

    q = graph_q(log_q_enc, graph, g, sweeps=200)
    flipped = graph_q(log_q_enc, graph, g._replace(alpha_logit=-g.alpha_logit, beta_logit=-g.beta_logit), 200)
    print(f"max |∂/∂θ| at the fixed point {grad_at(q):.2e}; with the sign flipped {grad_at(flipped):.2e}")
    assert grad_at(q) < 1e-10
    assert grad_at(flipped) > 1e-2
    assert torch.allclose(graph_q(log_q_enc, graph, g, sweeps=0), log_q_enc.exp())  # no sweeps: q_φ


def _ambiguous_link_set(seed: int):
    """240 items in 3 overlapping unit Gaussian groups in 4-D (means 2 sd apart: the features alone
    put about a quarter of the items in the wrong group), 10 two-coin workers (α = β = 0.9) × 119
    links; and the accuracy of the Bayes classifier of the features (the nearest true mean)."""
    rng = np.random.default_rng(seed)
    O, y = overlapping_groups(240, rng)
    df = two_coin_workers(y, 10, 0.9, 0.9, window=120, seed=seed)
    data = cz.LinkData.from_arrays(df["i"].to_numpy(), df["j"].to_numpy(), df["same"].to_numpy(), O,
                                   workers=df["worker"].to_numpy(), labels=y)
    mu = np.eye(3, 4) * 2.0 / np.sqrt(2.0)
    bayes = hungarian_accuracy(y, ((O[:, None, :] - mu[None]) ** 2).sum(-1).argmin(1))
    return data, bayes


def _accuracy(data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = cz.fit(cz.SCDC(n_clusters=3, hidden=(32, 32)), data, n_epochs=100, pretrain=100, seed=0,
                      n_init=1, progress_bar=False, **kw)
    return hungarian_accuracy(data.labels, post.predict().to_numpy())


def test_links_lift_scdc_where_the_features_are_ambiguous():
    """With about 10 links per item, SCDC's clusters beat the Bayes classifier of the features (the best
    a function of the features alone, such as the paper's amortised q(z | o), can do in expectation) by
    0.1 and its own fit without the links by 0.15."""
    data, bayes = _ambiguous_link_set(0)
    with_links, without = _accuracy(data), _accuracy(data.without_annotations())
    print(f"accuracy with {data.n_annotations} links {with_links:.3f}, without {without:.3f}; "
          f"the features' Bayes classifier {bayes:.3f}")
    assert with_links > bayes + 0.1
    assert with_links > without + 0.15
