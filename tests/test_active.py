"""Which query next, for every model: suggest's frame (ids, users, no duplicate, no item with itself),
its candidates' validation, BALD against a Monte-Carlo mutual information, the fantasy step against
dense EP conditioning, the links' information against enumeration, seeds, and suggest_run on a run
folder in its own column names."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch.special import ndtr

import crowdzoo as cz
from crowdzoo import zoo
from crowdzoo.active import suggest_run
from crowdzoo.core.suggest import (
    STRATEGIES,
    GaussianQueries,
    LinkQueries,
    bald_score,
    binary_entropy,
    gaussian_queries,
    moment_gaussian,
)
from crowdzoo.errors import DataError

FAST = {"natgrad": dict(max_iter=8, tol=0, progress_bar=False, n_epochs=3),
        "ep": dict(max_iter=4, vb_sweeps=5),
        "map": dict(max_iter=50), "gibbs": dict(n_sweeps=6, burn_in=2, progress_bar=False),
        "svi": dict(num_steps=15, n_draws=12, n_epochs=3)}
MODELS = {"gppl": lambda: cz.GPPL(),
          "crowdgppl": lambda: cz.CrowdGPPL(n_components=2, n_inducing=5, n_inducing_users=None),
          "collabgp": lambda: cz.CollabGP(n_latent=2), "bradley-terry": lambda: cz.BradleyTerry(),
          "gppl-per-user": lambda: cz.GPPLPerUser(n_inducing=5),
          "crowdbt-gp": lambda: cz.CrowdBTGP(n_inducing=5), "dpm": lambda: cz.DPMCommunities(),
          "scdc": lambda: cz.SCDC(n_clusters=4, latent_dim=2, hidden=(8,)),
          "bayesscdc": lambda: cz.BayesSCDC(n_clusters=4, latent_dim=2, hidden=(8,))}


@pytest.fixture(scope="module")
def posts(crowd):
    links, _ = cz.simulate_links(n_arms=3, n_per_arm=6, n_annotated=12, n_workers=3, window=6, seed=0)
    out = {}
    for e in zoo.ZOO:
        kw = {k: v for k, v in FAST[e.default].items() if k in zoo.route_settings(e.route(e.default))}
        if e.name == "gppl-per-user":
            kw = dict(max_iter=6, tol=0, progress_bar=False)
        out[e.name] = cz.fit(MODELS[e.name](), links if e.data == "links" else crowd, seed=0, **kw)
    return out


def _users_of(post):
    return post._query_ids()[1]


@pytest.mark.parametrize("name", list(MODELS))
def test_every_model_suggests_distinct_known_queries(posts, name):
    post = posts[name]
    items, users = post._query_ids()
    n_pairs = len(items) * (len(items) - 1) // 2 * (1 if users is None else len(users))
    for strategy in STRATEGIES:
        df = post.suggest(6, strategy=strategy, seed=1)
        assert list(df.columns) == (["a", "b", "score"] if users is None else ["user", "a", "b", "score"])
        assert len(df) == 6 and np.isfinite(df["score"]).all()
        assert df["a"].isin(items).all() and df["b"].isin(items).all() and (df["a"] != df["b"]).all()
        key = [frozenset(p) for p in zip(df["a"], df["b"])]
        if users is not None:
            assert df["user"].isin(users).all()
            key = list(zip(key, df["user"]))
        assert len(set(key)) == len(key)
    # asked for more than there are, a batch holds every candidate once
    whole = post.suggest(n_pairs + 5, users=None if users is None else list(users[:1]),
                         candidates=None)
    assert len(whole) == (n_pairs if users is None else n_pairs // len(users))
    assert len({frozenset(p) for p in zip(whole["a"], whole["b"])}) == len(whole)
    with pytest.raises(DataError, match="strategy.*'bold'"):
        post.suggest(2, strategy="bold")


def test_candidates_are_validated_by_column_row_and_id(posts):
    post = posts["crowdgppl"]
    good = pd.DataFrame({"user": ["ann", "bob"], "a": ["item0", "item1"], "b": ["item2", "item3"]})
    df = post.suggest(5, candidates=good)
    assert len(df) == 2 and set(zip(df["user"], df["a"])) == {("ann", "item0"), ("bob", "item1")}
    bad = good.assign(b=["item2", "nope"], user=["ann", "bob"])
    with pytest.raises(DataError, match=r"column 'b'.*row 1.*'nope'"):
        post.suggest(1, candidates=bad)
    with pytest.raises(DataError, match=r"column 'user'.*row 0.*'zed'"):
        post.suggest(1, candidates=good.assign(user=["zed", "bob"]))
    with pytest.raises(DataError, match=r"row 1.*item1.*itself"):
        post.suggest(1, candidates=good.assign(b=["item2", "item1"]))
    with pytest.raises(DataError, match=r"users.*'zed'"):
        post.suggest(1, users=["zed"])
    with pytest.raises(DataError, match="missing column"):
        post.suggest(1, candidates=good.drop(columns="b"))
    # without a user column, each pair is offered to the given users; a repeated pair is one query
    df = post.suggest(10, candidates=pd.DataFrame({"a": ["item0", "item2"], "b": ["item2", "item0"]}),
                      users=["cat"])
    assert len(df) == 1 and df["user"].iloc[0] == "cat"
    with pytest.raises(DataError, match="no users"):
        posts["gppl"].suggest(1, users=["ann"])
    with pytest.raises(DataError, match="n:"):
        post.suggest(0)


def test_seeds_reproduce(posts):
    post = posts["gppl"]
    for s in ("random", "thompson", "bald"):
        pd.testing.assert_frame_equal(post.suggest(4, strategy=s, seed=3),
                                      post.suggest(4, strategy=s, seed=3))
    a, b = post.suggest(8, strategy="random", seed=0), post.suggest(8, strategy="random", seed=1)
    assert not a[["a", "b"]].equals(b[["a", "b"]])


def test_bald_matches_a_monte_carlo_mutual_information():
    g = torch.Generator().manual_seed(0)
    for mu, var in ((0.0, 1.0), (0.8, 0.5), (-1.5, 3.0), (0.3, 0.05)):
        f = mu + math.sqrt(var) * torch.randn(400_000, generator=g, dtype=torch.float64)
        p = ndtr(f)
        mi = binary_entropy(p.mean()) - binary_entropy(p).mean()
        bald = bald_score(torch.tensor([mu]), torch.tensor([var]))
        assert abs(float(bald) - float(mi)) < 6e-3
        # the Gauss–Hermite route of non-probit links, given the probit as a link, agrees too
        q = GaussianQueries(torch.tensor([mu]), torch.tensor([var]), link=lambda x, rows: ndtr(x))
        assert abs(float(q.scores("bald", np.random.default_rng(0))) - float(mi)) < 6e-3


def _dense_expected_covariance(Sigma, mean, q, link):
    """E_y of the covariance after EP's Gaussian site for y on g_q, by dense precision-form conditioning
    and a fine grid for g_q | y: independent of the rank-one column update."""
    v = Sigma[q, q]
    x = mean[q] + torch.sqrt(v) * torch.linspace(-10, 10, 20001, dtype=torch.float64)
    prior = torch.exp(-0.5 * (x - mean[q]) ** 2 / v)
    out = torch.zeros_like(Sigma)
    Z_total = 0.0
    for py in (link(x), 1 - link(x)):
        w = prior * py
        Z = float(w.sum() / prior.sum())
        m_y = (w * x).sum() / w.sum()
        v_y = (w * (x - m_y) ** 2).sum() / w.sum()
        tau = 1.0 / v_y - 1.0 / v  # the site precision that moves g_q's variance to v_y
        P = torch.linalg.inv(Sigma)
        P[q, q] += tau
        out += Z * torch.linalg.inv(P)
        Z_total += Z
    assert abs(Z_total - 1.0) < 1e-9
    return out


@pytest.mark.parametrize("link", ["probit", "logit"])
def test_fantasy_step_matches_dense_ep_conditioning(link):
    torch.manual_seed(0)
    N = 6
    L = torch.randn(N, N, dtype=torch.float64)
    K = L @ L.T / N + 0.1 * torch.eye(N, dtype=torch.float64)
    m = torch.randn(N, dtype=torch.float64) * 0.5
    a, b = np.triu_indices(N, 1)
    fn = (lambda x, rows=None: ndtr(x)) if link == "probit" else (lambda x, rows=None: torch.sigmoid(x))
    Q = gaussian_queries([(m, K)], np.zeros(len(a), dtype=np.int64), a, b,
                         None if link == "probit" else fn)
    D = torch.zeros(len(a), N, dtype=torch.float64)  # dense: g = D f
    D[torch.arange(len(a)), torch.as_tensor(a)] = 1.0
    D[torch.arange(len(a)), torch.as_tensor(b)] = -1.0
    Sigma = D @ K @ D.T
    mean = D @ m
    # pairs' covariance is singular (15 differences of 6 utilities): condition in the utilities' space
    Sigma_f = K.clone()
    for q in (3, 11):
        d = D[q]
        v = d @ Sigma_f @ d
        x = mean[q] + torch.sqrt(v) * torch.linspace(-10, 10, 20001, dtype=torch.float64)
        prior = torch.exp(-0.5 * (x - mean[q]) ** 2 / v)
        expected = torch.zeros_like(Sigma_f)
        for py in (fn(x), 1 - fn(x)):
            w = prior * py
            Z = w.sum() / prior.sum()
            m_y = (w * x).sum() / w.sum()
            v_y = (w * (x - m_y) ** 2).sum() / w.sum()
            tau = 1.0 / v_y - 1.0 / v
            P = torch.linalg.inv(Sigma_f) + tau * torch.outer(d, d)
            expected += Z * torch.linalg.inv(P)
        Sigma_f = expected
        Q.fantasy(q)
        Sigma = D @ Sigma_f @ D.T
        assert torch.allclose(Q.var, torch.diagonal(Sigma), atol=1e-6)
        assert torch.allclose(Q.mean, mean)  # the expected label leaves the means
    # and the columns after two steps: Σ − VᵀV
    assert torch.allclose(Q.column(5) - Q.V.T @ Q.V[:, 5], Sigma[:, 5], atol=1e-6)
    # a direct check of the dense helper on a nonsingular joint Gaussian
    S = torch.eye(3, dtype=torch.float64) + 0.5
    Q3 = GaussianQueries(torch.zeros(3, dtype=torch.float64), torch.diagonal(S).clone(), lambda q: S[:, q])
    Q3.fantasy(0)
    dense = _dense_expected_covariance(S, torch.zeros(3, dtype=torch.float64), 0, ndtr)
    assert torch.allclose(Q3.var, torch.diagonal(dense), atol=1e-6)


def test_batches_spread_over_correlated_pairs():
    """Two candidates with (nearly) the same latent difference: after one is chosen, the fantasy step
    leaves the other little to teach, and the batch takes a third, independent one."""
    S = torch.tensor([[1.0, 0.99, 0.0], [0.99, 1.0, 0.0], [0.0, 0.0, 0.9]], dtype=torch.float64)
    Q = GaussianQueries(torch.zeros(3, dtype=torch.float64), torch.diagonal(S).clone(), lambda q: S[:, q])
    from crowdzoo.core.suggest import greedy

    pick, _ = greedy(Q, 2, "bald")
    assert sorted(pick.tolist()) == [0, 2] or sorted(pick.tolist()) == [1, 2]


def test_utility_gaussian_of_gppl_matches_its_draws(posts):
    post = posts["gppl"]
    m, S = post.utility_gaussian()
    m_mc, S_mc = moment_gaussian(post.utility_draws(20000, seed=1))
    assert torch.allclose(m, m_mc, atol=0.05 * S.diagonal().max().sqrt())
    assert torch.allclose(S, S_mc, atol=0.05 * S.diagonal().max())


def test_link_information_matches_enumeration():
    rng = np.random.default_rng(0)
    K = 3
    probs = torch.as_tensor(rng.dirichlet(np.ones(K), size=4))
    a, b = np.array([0, 1, 2]), np.array([1, 3, 3])
    alpha, beta = torch.tensor([0.9, 0.7, 0.95]), torch.tensor([0.8, 0.85, 0.6])
    Q = LinkQueries(probs, a, b, alpha, beta)
    got = Q.scores("bald", rng)
    for c in range(3):  # I(L; z_a, z_b) = H[L] − Σ_{k,l} q q H[L | k, l], by enumeration (nats → bits)
        pa, pb = probs[a[c]], probs[b[c]]
        joint = pa[:, None] * pb[None, :]
        p1 = torch.where(torch.eye(K, dtype=torch.bool), alpha[c], 1 - beta[c]).double()
        H = binary_entropy((joint * p1).sum()) - (joint * binary_entropy(p1)).sum()
        assert abs(float(got[c]) - float(H)) < 1e-10
    before = Q.q.clone()
    Q.fantasy(0)  # the most probable label moves the two items' marginals, no other
    assert not torch.allclose(Q.q[0], before[0]) and torch.allclose(Q.q[2:], before[2:])
    assert torch.allclose(Q.q.sum(-1), torch.ones(4, dtype=torch.float64))


@pytest.mark.parametrize("name", ["crowdgppl", "scdc"])
def test_suggest_run_speaks_the_runs_columns(posts, tmp_path, name):
    post = posts[name]
    post.save(tmp_path / "posterior.pt")
    if name == "scdc":
        run = {"model": "scdc", "a_col": "left", "b_col": "right", "worker_col": "annotator"}
        user_col = "annotator"
    else:
        run = {"model": "crowdgppl", "a_col": "left", "b_col": "right", "user_col": "judge", "sep": ";"}
        user_col = "judge"
    (tmp_path / "run.json").write_text(json.dumps(run))
    items, users = post._query_ids()
    df = suggest_run(tmp_path, 3, users=[users[0]], seed=0)
    assert list(df.columns) == [user_col, "left", "right", "score"] and (df[user_col] == users[0]).all()
    expected = post.suggest(3, users=[users[0]], seed=0)
    assert (df["left"].to_numpy() == expected["a"].to_numpy()).all()
    cands = pd.DataFrame({"left": [items[0], items[1]], "right": [items[2], items[3]], user_col: users[:2]})
    path = tmp_path / "cands.csv"
    cands.to_csv(path, index=False, sep=run.get("sep", ","))
    assert len(suggest_run(tmp_path, 5, candidates=path)) == 2
    with pytest.raises(DataError, match=r"column 'right'.*row 1"):
        suggest_run(tmp_path, 1, candidates=cands.assign(right=[items[2], "nope"]))
    with pytest.raises(DataError, match="column 'left'"):
        suggest_run(tmp_path, 1, candidates=cands.drop(columns="left"))
