"""collabGP (Houlsby et al. 2012): the preference kernel, EP + VB against NUTS and Monte Carlo,
FITC against the full model, BALD against Monte Carlo, and the active-learning loop."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import spearmanr
from torch.special import ndtr

import crowdzoo as cz
from crowdzoo.active import active_learning, bald_score, binary_entropy, next_queries, query_scores
from crowdzoo.gp.kernels import Kernel
from crowdzoo.models.collabgp import canonical_pairs, pref_kernel


def all_pairs(n_items, users):
    i, j = np.triu_indices(n_items, 1)
    return np.tile(i, len(users)), np.tile(j, len(users)), np.repeat(users, len(i))


# ------------------------------------------------------------------ the preference kernel
def test_pref_kernel_is_the_covariance_of_differences_antisymmetric_and_psd():
    rng = np.random.default_rng(0)
    X = torch.as_tensor(rng.normal(size=(6, 2)))
    k = Kernel("se", torch.tensor([0.8, 1.3]))
    i, j = np.nonzero(~np.eye(6, dtype=bool))  # all 30 ordered pairs
    K = pref_kernel(k, X[i], X[j], X[i], X[j])
    # independent: Cov[f_i − f_j, f_k − f_l] = A K Aᵀ with the difference matrix A
    A = torch.zeros(len(i), 6, dtype=torch.float64)
    A[np.arange(len(i)), i] = 1.0
    A[np.arange(len(i)), j] = -1.0
    assert torch.allclose(K, A @ k(X, X) @ A.T, atol=1e-12)
    # anti-symmetry: g(x_j, x_i) = −g(x_i, x_j), so the correlation of the two is −1 (supp. Eq. 3)
    swap = torch.as_tensor([np.flatnonzero((i == jj) & (j == ii))[0] for ii, jj in zip(i, j, strict=True)])
    assert torch.allclose(K[:, swap], -K, atol=1e-12)
    corr = K[np.arange(len(i)), swap] / K.diagonal()
    assert torch.allclose(corr, -torch.ones_like(corr))
    eig = torch.linalg.eigvalsh(K)
    assert eig.min() > -1e-10 and (eig > 1e-8).sum() == 5  # PSD, rank N − 1


def test_canonical_pairs_flip_labels_with_the_orientation():
    pairs, z, t = canonical_pairs(np.array([0, 2, 1]), np.array([1, 0, 0]), np.array([1.0, 1.0, 0.0]))
    assert pairs.tolist() == [[0, 1], [0, 2]]
    assert z.tolist() == [0, 1, 0]
    assert t.tolist() == [1.0, -1.0, 1.0]  # 2 ≻ 0 means 0 loses; "1 ≻ 0 is false" means 0 wins


# ------------------------------------------------------------------ a tiny problem, three routes
@pytest.fixture(scope="module")
def tiny():
    data, _ = cz.simulate_collab(n_items=5, n_users=6, n_latent=1, seed=2)
    train_rows, _ = cz.split_each_user(data, (6, None), seed=0)
    return data.subset(train_rows)


def _probs(post, n_items=5, n_users=6):
    a, b, u = all_pairs(n_items, np.arange(n_users))
    return post.predict_proba(a, b, users=u)


def test_ep_and_svi_agree_with_nuts_on_a_tiny_problem(tiny):
    m = cz.CollabGP(n_latent=1, learn_scale=False)  # the paper's prior: no scale for VB and NUTS to differ on
    nuts = cz.fit(m, tiny, method="nuts", num_samples=200, warmup_steps=200, num_chains=2)
    ep = cz.fit(m, tiny, method="ep", tol=1e-6, max_iter=500, progress_bar=False)
    ep_paper = cz.fit(m, tiny, method="ep", tol=1e-6, max_iter=500, progress_bar=False,
                      gp_factors="factorised")
    svi = cz.fit(m, tiny, method="svi", num_steps=1200, lr=0.02, progress_bar=False)
    p_nuts, p_ep, p_svi = _probs(nuts), _probs(ep), _probs(svi)
    assert nuts.sample_stats["diverging"].sum() == 0
    # the predictions are informative (far from ½) and the routes agree far more closely
    assert np.abs(p_nuts - 0.5).mean() > 0.15
    assert np.abs(p_ep - p_nuts).mean() < 0.03
    assert np.abs(_probs(ep_paper) - p_nuts).mean() < 0.03
    assert np.abs(p_svi - p_nuts).mean() < 0.03


def test_fitc_with_every_input_as_pseudo_input_is_the_full_model():
    rng = np.random.default_rng(4)
    N, U = 6, 5
    X, Uf = rng.normal(size=(N, 2)), rng.normal(size=(U, 2))
    tree = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]])  # P = N − 1 independent pairs
    k = rng.integers(0, len(tree), 60)
    users = rng.integers(0, U, 60)
    y = rng.integers(0, 2, 60)
    data = cz.PairwiseData.from_arrays(tree[k, 0], tree[k, 1], y, X, users=users, user_features=Uf)
    a, b, u = all_pairs(N, np.arange(U))  # unseen pairs too: the tree spans every difference
    # the paper's unit scales, and learned ones (the labels are noise: those scales prune g to P = ½,
    # and q(s) must not see the items' constant, a direction of a that no pair sees, in one
    # parametrisation and not in the other)
    for m in (cz.CollabGP(n_latent=2, learn_scale=False), cz.CollabGP(n_latent=2)):
        full = cz.fit(m, data, method="ep", tol=1e-8, max_iter=300, progress_bar=False)
        setup = m.setup(data, pseudo_pairs=tree, pseudo_users=np.arange(U))
        assert setup.items.Zb is not None and float(setup.delta_h.max()) < 1e-6
        fitc = cz.fit(m, data, method="ep", tol=1e-8, max_iter=300, progress_bar=False, setup=setup)
        p_full = full.predict_proba(a, b, users=u)
        np.testing.assert_allclose(fitc.predict_proba(a, b, users=u), p_full, atol=1e-5)
        assert fitc.log_evidence == pytest.approx(full.log_evidence, abs=1e-4)
    m = cz.CollabGP(n_latent=2, learn_scale=False)
    full = cz.fit(m, data, method="ep", tol=1e-8, max_iter=300, progress_bar=False)
    # and with fewer pseudo-inputs it is a different (approximate) model
    few = cz.fit(m, data, method="ep", tol=1e-8, max_iter=300, progress_bar=False,
                 setup=m.setup(data, pseudo_pairs=tree[:2], pseudo_users=np.arange(2)))
    assert np.abs(few.predict_proba(a, b, users=u) - full.predict_proba(a, b, users=u)).max() > 1e-3


def _mc_log_evidence(setup, n=200_000, reps=10, seed=0):
    """log P(T) = log E_prior[Π Φ(t g)] by plain Monte Carlo over prior draws of W and H."""
    g = torch.Generator().manual_seed(seed)
    lls = []
    for _ in range(reps):
        a = torch.randn(n, setup.D, setup.Phi_h.shape[1], generator=g, dtype=torch.float64)
        h = a @ setup.Phi_h.T
        if setup.Phi_w is None:
            w = torch.randn(n, setup.n_users, setup.D, generator=g, dtype=torch.float64)
        else:
            b = torch.randn(n, setup.D, setup.Phi_w.shape[1], generator=g, dtype=torch.float64)
            w = (b @ setup.Phi_w.T).transpose(1, 2)
        gg = (w[:, setup.u, :] * h[:, :, setup.z].transpose(1, 2)).sum(-1)
        lls.append(torch.log(ndtr(setup.t * gg)).sum(-1))
    ll = torch.cat(lls)
    return float(torch.logsumexp(ll, 0) - math.log(ll.numel()))


@pytest.mark.parametrize("user_features", [False, True])
def test_ep_evidence_tracks_monte_carlo(user_features):
    """The EP evidence (§4.3) against plain Monte Carlo with D = 1, on four label sets for the same
    pairs whose exact evidence spans ≈4 nats. The VB step fits one of the 2^D sign modes of (W, H),
    so the EP value should sit near D log 2 below the exact one; it must also order the label sets
    as the exact evidence does."""
    rng = np.random.default_rng(1)
    N, U, n = 5, 3, 16
    X, Uf = rng.normal(size=(N, 2)), rng.normal(size=(U, 2))
    a = rng.integers(0, N, n)
    b = (a + rng.integers(1, N, n)) % N
    users = rng.integers(0, U, n)
    f = 2.0 * X[:, 0]
    labels = {"random": rng.integers(0, 2, n),
              "users disagree": (np.array([1, 1, -1])[users] * (f[a] - f[b]) > 0),
              "one opinion": f[a] > f[b],
              "self-contradicting": np.where(np.arange(n) % 2 == 0, f[a] > f[b], f[a] < f[b])}
    ep, ep_paper, exact = [], [], []
    for y in labels.values():
        data = cz.PairwiseData.from_arrays(a, b, y.astype(float), X, users=users, user_features=Uf)
        m = cz.CollabGP(n_latent=1, user_features=user_features, lengthscale="median distance",
                        user_lengthscale="median distance", learn_scale=False)  # the paper's prior
        post = cz.fit(m, data, method="ep", tol=1e-8, max_iter=500, progress_bar=False)
        ep.append(post.log_evidence + math.log(2.0))
        ep_paper.append(cz.fit(m, data, method="ep", tol=1e-8, max_iter=500, progress_bar=False,
                               gp_factors="factorised").log_evidence + math.log(2.0))
        exact.append(_mc_log_evidence(post.setup, n=100_000, reps=4))
    ep, exact = np.array(ep), np.array(exact)
    assert np.ptp(exact) > 2.5
    assert np.abs(ep - exact).max() < 0.75
    assert np.abs(np.array(ep_paper) - exact).max() < 0.75
    # the same order wherever Monte Carlo tells the label sets apart (without user features,
    # "users disagree" and "one opinion" have the same exact evidence: flipping w_u is free)
    i, j = np.nonzero(exact[:, None] - exact[None, :] > 0.3)
    assert i.size >= 4 and (ep[i] > ep[j]).all()


# ------------------------------------------------------------------ recovery and length-scales
@pytest.fixture(scope="module")
def synthetic():
    data, truth = cz.simulate_collab(n_users=40, seed=0)
    train_rows, test_rows = cz.split_each_user(data, (30, None), seed=0)
    return data, data.subset(train_rows), data.subset(test_rows), truth


def _error(post, test):
    p = post.predict_proba(test.item_ids[test.a], test.item_ids[test.b], users=test.user_ids[test.users])
    return float(np.mean((p > 0.5) != (test.y > 0.5)))


def test_ep_recovers_the_synthetic_users_preferences(synthetic):
    data, train, test, truth = synthetic
    # the error of the noise-free truth itself (labels are sign(g + ε), ε ~ N(0, 1))
    g = truth["G"][test.users, test.a, test.b]
    bayes = float(np.mean((g > 0) != (test.y > 0.5)))
    post = cz.fit(cz.CollabGP(n_latent=5, n_pseudo_pairs=25, n_pseudo_users=25), train, method="ep",
                  progress_bar=False)
    assert post.trace["converged"]
    err = _error(post, test)
    assert err < bayes + 0.06 and err < 0.25
    # the posterior of w, h recovers g (up to the symmetries of W H, which g does not have)
    mean, _ = post.latent_moments(test.a, test.b, users=test.users)
    assert np.corrcoef(mean[0].numpy(), g)[0, 1] > 0.8


def test_ep_with_many_pairs_and_few_labels_each():
    """Sushi-B's shape (100 items, 10 labels per user, almost every pair labelled once): the
    paper's factorised GP sites diverge here (docs/collabgp.md); with the exact GP factors EP
    converges, predicts within 0.07 of the Bayes error, and D = 20 pays a modest Occam price
    against D = 5 (the D = 20 model contains the D = 5 one) instead of thousands of nats."""
    data, truth = cz.simulate_collab(n_items=100, n_users=100, seed=0)
    tr, te = cz.split_each_user(data, (10, 5), seed=0)
    train, test = data.subset(tr), data.subset(te)
    g = truth["G"][test.users, test.a, test.b]
    bayes = float(np.mean((g > 0) != (test.y > 0.5)))
    ev = {}
    for D in (5, 20):
        paper = cz.CollabGP.paper(n_latent=D)
        post = cz.fit(paper, train, method="ep", progress_bar=False)
        assert post.trace["converged"] and post.trace["n_iter"] < 60
        assert _error(post, test) < bayes + 0.07
        ev[D] = post.log_evidence
    assert ev[5] - 200 < ev[20] < ev[5] + 10


def test_evidence_prefers_the_true_length_scale(synthetic):
    """Supplement a §9: the EP evidence peaks near the generating length-scale (1)."""
    _, train, _, _ = synthetic
    ev = {ell: cz.fit(cz.CollabGP(n_latent=5, lengthscale=ell, user_lengthscale=1.0), train, method="ep",
                      progress_bar=False).log_evidence for ell in (0.15, 1.0, 8.0)}
    assert ev[1.0] > ev[0.15] + 5 and ev[1.0] > ev[8.0] + 5


def test_predictions_for_new_users_from_their_features(synthetic):
    data, train, test, truth = synthetic
    post = cz.fit(cz.CollabGP(n_latent=5), train, method="ep", progress_bar=False)
    new = np.random.default_rng(0).uniform(-1.7, 1.7, size=(3, 2))
    a, b, u = all_pairs(10, np.arange(3))
    p = post.predict_proba(a, b, users=u, user_features=new)
    assert p.shape == a.shape and np.all((p > 0) & (p < 1))
    # a new user at a training user's features is predicted like that user
    p_same = post.predict_proba([0, 1], [2, 3], users=[0, 0], user_features=data.user_features[5:6])
    p_train = post.predict_proba([0, 1], [2, 3], users=[5, 5])
    np.testing.assert_allclose(p_same, p_train, atol=0.05)


# ------------------------------------------------------------------ BALD
def test_bald_closed_form_matches_monte_carlo_for_gaussian_g():
    g = torch.Generator().manual_seed(0)
    mean = torch.tensor([-2.0, -0.5, 0.0, 0.3, 1.0, 2.5], dtype=torch.float64)
    var = torch.tensor([0.1, 4.0, 1.0, 0.01, 9.0, 2.0], dtype=torch.float64)
    f = mean + var.sqrt() * torch.randn(400_000, 6, generator=g, dtype=torch.float64)
    mc = binary_entropy(ndtr(f).mean(0)) - binary_entropy(ndtr(f)).mean(0)
    np.testing.assert_allclose(bald_score(mean, var).numpy(), mc.numpy(), atol=5e-3)


def test_bald_ranks_a_fitted_posterior_like_monte_carlo(synthetic):
    _, train, test, _ = synthetic
    post = cz.fit(cz.CollabGP(n_latent=5), train.subset(np.arange(0, train.n_pairs, 3)), method="ep",
                  progress_bar=False)
    a, b, u = test.a[:200], test.b[:200], test.users[:200]
    s = query_scores(post, a, b, u, "bald")
    # Monte Carlo over the factorised posterior of w and h (not over a Gaussian g)
    g = torch.Generator().manual_seed(1)
    X = post.setup.X
    Phi, delta = post.setup.items.basis(X[a], X[b])
    n, D = 4000, post.setup.D

    def noise(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    a_draws = post.a_mean[0] + torch.einsum("dmk,ndk->ndm", torch.linalg.cholesky(post.a_cov),
                                            noise(n, *post.a_mean.shape[1:]))
    h = torch.einsum("ndm,pm->npd", a_draws, Phi) + delta[:, None].sqrt() * noise(n, len(a), D)
    w = post.w_mean[0, u] + post.w_var[u].sqrt() * noise(n, len(a), D)
    gg = (w * h).sum(-1)
    mc = (binary_entropy(ndtr(gg).mean(0)) - binary_entropy(ndtr(gg)).mean(0)).numpy()
    assert spearmanr(s, mc).statistic > 0.9


def test_next_queries_picks_each_users_best_pair(synthetic):
    _, train, test, _ = synthetic
    post = cz.fit(cz.CollabGP(n_latent=3), train, method="ep", progress_bar=False)
    cand = pd.DataFrame({"user": test.users, "a": test.a, "b": test.b})
    best = next_queries(post, cand, "bald", per_user=2)
    assert len(best) == 2 * cand["user"].nunique()
    scores = query_scores(post, cand["a"], cand["b"], cand["user"], "bald")
    for user, rows in best.groupby("user"):
        assert rows["score"].min() >= np.sort(scores[cand["user"] == user])[-2] - 1e-12


def test_active_learning_loop_moves_one_pair_per_user_and_learns():
    data, _ = cz.simulate_collab(n_users=30, seed=3)
    tr, pool, te = cz.split_each_user(data, (5, 35, 5), seed=0)
    # the paper's prior (its Table 3 runs): four queries per user on 30 users move the error by a few
    # test labels, a margin the learned scales' run does not keep
    df = active_learning(cz.CollabGP(n_latent=3, learn_scale=False), data, tr, pool, te, strategy="bald",
                         n_queries=4)
    assert df["queries"].tolist() == [0, 1, 2, 3, 4]
    assert df["n_train"].tolist() == [150 + 30 * q for q in range(5)]
    assert df["error"].iloc[-1] < df["error"].iloc[0]


# ------------------------------------------------------------------ API and errors
def test_collabgp_has_no_utilities_and_needs_users(tiny):
    post = cz.fit(cz.CollabGP(n_latent=1), tiny, method="ep", progress_bar=False)
    with pytest.raises(cz.DataError, match="no utility per item"):
        post.utilities()
    with pytest.raises(cz.DataError, match="users="):
        post.predict_proba([0], [1])
    with pytest.raises(cz.DataError, match="row 1: user id 99"):
        post.predict_proba([0, 1], [1, 2], users=[0, 99])
    with pytest.raises(cz.DataError, match="'natgrad'"):
        cz.fit(cz.CollabGP(), tiny, method="natgrad")
    single = cz.simulate_gppl(n_items=5, n_pairs=20)[0]
    with pytest.raises(cz.DataError, match="users"):
        cz.fit(cz.CollabGP(), single, method="ep")
    with pytest.raises(cz.DataError, match="n_latent"):
        cz.CollabGP(n_latent=0)
    assert cz.CollabGP().variant("\\u").user_features is False


def test_split_each_user_sizes():
    data, _ = cz.simulate_collab(n_users=7, seed=0)
    parts = cz.split_each_user(data, (5, 35, None), seed=1)
    counts = [np.bincount(data.users[p], minlength=7) for p in parts]
    assert [c.tolist() for c in counts] == [[5] * 7, [35] * 7, [5] * 7]
    assert np.unique(np.concatenate(parts)).size == data.n_pairs


def test_to_arviz_carries_ids_and_replicates_labels(synthetic):
    _, train, _, _ = synthetic
    post = cz.fit(cz.CollabGP(n_latent=3), train, method="ep", progress_bar=False)
    dt = post.to_arviz(n_draws=200)
    assert dt.posterior["W"].dims == ("chain", "draw", "user", "latent")
    assert list(dt.posterior["W"].coords["user"].values) == list(train.user_ids)
    assert dt.attrs["approximate"] == 1 and "max_change" in dt["optimisation"]
    # replicated labels agree with the observed ones about as often as the model predicts
    p = post.predict_proba(train.a, train.b, users=train.users)
    agree_rep = (dt.posterior_predictive["y"].values[0] == train.y).mean()
    assert agree_rep == pytest.approx(np.mean(np.where(train.y > 0.5, p, 1 - p)), abs=0.03)


# ------------------------------------------------------------------ comparisons
def test_collabgp_sushi_table_on_the_fixture(tmp_path):
    from crowdzoo.cli import main
    from crowdzoo.data.sushi import write_sushi_fixture

    write_sushi_fixture(tmp_path / "sushi", n_users=60, seed=0)
    out = tmp_path / "t1.md"
    assert main(["compare", "collabgp-sushi", "--quick", "--data-dir", str(tmp_path / "sushi"),
                 "--out", str(out)]) == 0
    text = out.read_text()
    assert "| CPU |" in text and "0.171" in text and "Made by `crowdzoo compare collabgp-sushi" in text
    df = pd.read_csv(out.with_suffix(".csv"))
    err = df[df.metric == "error"].set_index("method")["value"]
    assert (err < 0.45).all()  # the fixture's users have learnable tastes
    with pytest.raises(cz.DataError, match="--data-dir is required"):
        from crowdzoo.comparisons import collabgp

        collabgp.sushi.run_one(0)


def test_active_learning_comparison_on_the_sushi_fixture(tmp_path, monkeypatch):
    from crowdzoo.comparisons import collabgp
    from crowdzoo.data.sushi import write_sushi_fixture

    write_sushi_fixture(tmp_path / "sushi", n_users=40, seed=0)
    cp = cz.CollabGP(n_latent=2).variant("\\u")
    monkeypatch.setattr(collabgp, "models", lambda quick: {"CP": (cp, "ep", {})})
    monkeypatch.setattr(collabgp, "STRATEGY", {"B": "bald"})
    df = collabgp.active_sushi.run_one(0, quick=True, data_dir=str(tmp_path / "sushi"))
    assert df["queries"].max() == 10 and set(df["method"]) == {"CP-B"}
    assert df["n_train"].tolist() == [5 * 40 + 40 * q for q in range(11)]
    assert "| CP-B |" in collabgp.active_sushi.summarise(df)


@pytest.mark.slow  # 50 s of EP runs; test_evidence_prefers_the_true_length_scale checks the evidence fast
def test_ep_learns_the_length_scales_by_the_evidence():
    """Learning collabGP's kernel: learn_kernel maximises the EP evidence over the item and user
    length-scales (supplement a §9's grid, done by an optimiser). Data drawn with ℓ = 1 for both; the
    median distance starts near 2; the learned values land closer to the truth, the evidence rises and
    the held-out error does not get worse."""
    data, _ = cz.simulate_collab(n_users=30, seed=0)
    tr, te = cz.split_each_user(data, (30, None), seed=0)
    train, test = data.subset(tr), data.subset(te)
    errs, posts = {}, {}
    for learn in (False, True):
        model = cz.CollabGP(n_latent=5, lengthscale="median distance", user_lengthscale="median distance",
                            learn_scale=False)  # the simulation's unit scales
        post = cz.fit(model, train, method="ep", learn_kernel=learn, progress_bar=False)
        p = post.predict_proba(test.item_ids[test.a], test.item_ids[test.b], users=test.user_ids[test.users])
        errs[learn], posts[learn] = float(((p > .5) != (test.y == 1)).mean()), post
    s = posts[True].settings
    print(f"start ℓ ({s['start_lengthscale']:.2f}, {s['start_user_lengthscale']:.2f}) → learned "
          f"({s['learned_lengthscale']:.2f}, {s['learned_user_lengthscale']:.2f}) in "
          f"{s['kernel_evaluations']} EP runs; evidence {posts[False].log_evidence:.1f} → "
          f"{posts[True].log_evidence:.1f}; error "
          f"{errs[False]:.3f} → {errs[True]:.3f}")
    for start, got in ((s["start_lengthscale"], s["learned_lengthscale"]),
                       (s["start_user_lengthscale"], s["learned_user_lengthscale"])):
        assert abs(np.log(got)) < 0.4 < abs(np.log(start))
    assert posts[True].log_evidence > posts[False].log_evidence + 5
    assert errs[True] <= errs[False] + 0.01
    assert posts[True].model.lengthscale == pytest.approx(s["learned_lengthscale"])


def test_default_lengthscales_per_dimension_keep_features_in_small_units():
    """Items whose utility lies in a 0–1 feature beside an irrelevant one in metres: the paper's single
    median distance is set by the metres and smooths the utility away; the per-dimension median
    heuristic (the default) keeps it, and predicts held-out labels far better."""
    rng = np.random.default_rng(0)
    N, U, n = 24, 3, 240
    X = np.c_[rng.uniform(0, 1, N), rng.normal(1500.0, 300.0, N)]
    f = 4.0 * np.sin(2 * np.pi * X[:, 0])
    a = rng.integers(0, N, n)
    b = (a + rng.integers(1, N, n)) % N
    y = (f[a] - f[b] + rng.normal(size=n) > 0).astype(float)
    users = rng.integers(0, U, n)
    data = cz.PairwiseData.from_arrays(a, b, y, X, users=users)
    train, test = data.subset(np.arange(180)), data.subset(np.arange(180, n))
    acc = {}
    for name, ell in (("default", None), ("paper", "median distance")):
        post = cz.fit(cz.CollabGP(n_latent=1, lengthscale=ell), train, method="ep", progress_bar=False)
        p = post.predict_proba(test.a, test.b, users=test.users)
        acc[name] = float(((p > 0.5) == (test.y == 1)).mean())
    assert acc["default"] > 0.75 and acc["default"] > acc["paper"] + 0.15, acc
