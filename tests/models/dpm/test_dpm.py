"""The DPM community model: the Gibbs + EP route against exact enumeration of every
partition on a tiny problem, recovery of simulated communities, bad input, save/load; a community's
EP posterior against NUTS on a fixed partition; the svi route's co-clustering against Gibbs."""
from __future__ import annotations

import math

import numpy as np
import pyro.distributions as dist
import pytest
import torch

import crowdzoo as cz
from crowdzoo.inference.ep import ep_fixed_s
from crowdzoo.models.dpm.gibbs import fit_gibbs


def _partitions(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for p in _partitions(rest):
        for i in range(len(p)):
            yield p[:i] + [[first] + p[i]] + p[i + 1:]
        yield [[first]] + p


@pytest.fixture(scope="module")
def tiny():
    """4 users, 6 items, 4 labels each; users 0–1 like x₀, users 2–3 dislike it (noisy)."""
    rng = np.random.default_rng(0)
    N = 6
    X = rng.uniform(0, 3, size=(N, 2))
    truth = [1.5 * X[:, 0], 1.5 * X[:, 0], -1.5 * X[:, 0], -1.5 * X[:, 0]]
    a, b, y, u = [], [], [], []
    for j in range(4):
        for _ in range(4):
            i, k = rng.choice(N, 2, replace=False)
            a.append(i)
            b.append(k)
            u.append(j)
            y.append(float(truth[j][i] - truth[j][k] + rng.normal() > 0))
    return cz.PairwiseData.from_arrays(np.array(a), np.array(b), np.array(y), X, users=np.array(u),
                                       user_ids=["u0", "u1", "u2", "u3"])


MODEL = cz.DPMCommunities(concentration=1.0, lengthscale=[1.5, 1.5], item_residual=False)  # the paper's


@pytest.fixture(scope="module")
def exact(tiny):
    """The exact posterior co-clustering of the four users: every partition weighted by
    Π_blocks Z_EP(block) × the CRP prior λ^K Π (n_k − 1)!, after checking one community's EP evidence
    against a Monte Carlo estimate of the GP marginal likelihood."""
    st = MODEL.setup(tiny)
    sgn = 2 * torch.as_tensor(tiny.y) - 1
    lam, U = MODEL.concentration, tiny.n_users

    def log_evidence(block):
        idx = torch.as_tensor(np.flatnonzero(np.isin(tiny.users, block)))
        return ep_fixed_s(st.K, st.H[idx], sgn[idx], max_iter=1000, tol=1e-10)[4]

    idx = torch.as_tensor(np.flatnonzero(np.isin(tiny.users, [0, 1, 2])))
    f = torch.randn(400_000, st.M, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    f = f @ torch.linalg.cholesky(st.K).T
    ll = torch.special.log_ndtr(sgn[idx] * (f @ st.H[idx].T)).sum(1)
    mc = float(torch.logsumexp(ll, 0) - math.log(ll.shape[0]))
    print(f"log Z: EP {log_evidence([0, 1, 2]):.5f}, Monte Carlo {mc:.5f}")  # docs/dpm.md quotes these
    assert abs(log_evidence([0, 1, 2]) - mc) < 0.01

    co, total, logs = np.zeros((U, U)), 0.0, []
    for part in _partitions(list(range(U))):
        lp = len(part) * math.log(lam) + sum(math.lgamma(len(bk)) for bk in part)
        logs.append((part, lp + sum(log_evidence(bk) for bk in part)))
    top = max(lp for _, lp in logs)
    for part, lp in logs:
        w = math.exp(lp - top)
        total += w
        for bk in part:
            co[np.ix_(bk, bk)] += w
    co /= total
    assert 0.15 < co[0, 1] < 0.85 and 0.15 < co[2, 3] < 0.85  # not a trivial posterior
    return co


def _gibbs_error(tiny, co, membership, n_sweeps):
    post = cz.fit(MODEL, tiny, method="gibbs", membership=membership, n_sweeps=n_sweeps, burn_in=200,
                  n_chains=2, seed=1, progress_bar=False)
    err = np.abs(post.coclustering().numpy() - co)
    print(f"{membership}, {n_sweeps} sweeps: co-clustering error max {err.max():.3f}, "
          f"mean {err[np.triu_indices(4, 1)].mean():.3f}")
    return err.max()


def test_gibbs_coclustering_matches_exact_enumeration(tiny, exact):
    """Joint membership moves (the exact route) against the enumeration. Measured (seed 1, 2 chains):
    largest |Gibbs − exact| co-clustering error 0.009 at 3000 sweeps; at 1000 sweeps the Monte Carlo
    error of a co-clustering share is about 0.5 / √(2 × 800 / 2) ≈ 0.018, so 0.05 is near 3 of those."""
    assert _gibbs_error(tiny, exact, "joint", 1000) < 0.05


@pytest.mark.slow
def test_marginal_membership_is_biased_but_close(tiny, exact):
    """The marginal membership move ignores correlations between a user's labels: measured (seed 1,
    3000 sweeps × 2 chains) largest error 0.046 (mean over pairs 0.031) against joint's 0.009."""
    errors = {m: _gibbs_error(tiny, exact, m, 3000) for m in ("marginal", "joint")}
    assert errors["joint"] < 0.05
    assert errors["marginal"] < 0.08
    assert errors["joint"] < errors["marginal"]


def _communities(n_users=60, n_items=30, n_labels=20, n_comm=4, scale=2.0, seed=0):
    """n_comm communities, each its own GP utility (SE, ℓ = 0.3, variance scale²) over 2-D features:
    the package's simulator, returning (data, each user's community)."""
    from crowdzoo.data.simulate_dpm import simulate_communities

    data, truth = simulate_communities(n_users=n_users, n_items=n_items, n_labels=n_labels,
                                       n_communities=n_comm, scale=scale, seed=seed)
    return data, truth["communities"]


def test_recovers_four_simulated_communities():
    from sklearn.metrics import adjusted_rand_score

    data, truth = _communities()
    # E[s] = shape / rate = 1/4: utilities with variance 4, as simulated (scale 2)
    model = cz.DPMCommunities(kernel="se", lengthscale=[0.3, 0.3], shape_s0=1.0, rate_s0=4.0,
                              item_residual=False)  # the simulated model: no item effects
    post = cz.fit(model, data, method="gibbs", n_sweeps=40, burn_in=20, n_chains=2, progress_bar=False)
    # confident predictions, but a sampler of the model's own posterior is not refitted to check them
    assert post.settings["confidence"]["verdict"] == "skip"
    co, partition = post.memberships()
    assert co.shape == (60, 60) and list(partition.index) == list(data.user_ids)
    ari = adjusted_rand_score(truth, partition.to_numpy())
    print(f"recovery: ARI {ari:.2f}")
    assert ari >= 0.8
    counts = post.n_communities()
    assert counts.idxmax() == 4 and abs(counts.sum() - 1) < 1e-12


def test_bad_input_is_refused_naming_the_argument(tiny):
    for t in (0, 2.5):
        with pytest.raises(cz.DataError, match="truncation"):
            cz.DPMCommunities(truncation=t)
    for lam in (0.0, -1.0, float("nan")):
        with pytest.raises(cz.DataError, match="concentration"):
            cz.DPMCommunities(concentration=lam)
    with pytest.raises(cz.DataError, match="concentration_prior"):
        cz.DPMCommunities(concentration_prior=dist.LogNormal(0.0, 1.0))
    pooled = cz.PairwiseData.from_arrays(tiny.a, tiny.b, tiny.y, tiny.item_features)
    with pytest.raises(cz.DataError, match="users"):
        cz.fit(cz.DPMCommunities(), pooled)
    with pytest.raises(cz.DataError, match="users"):
        fit_gibbs(cz.DPMCommunities(), pooled)
    silent = cz.PairwiseData.from_arrays(tiny.a, tiny.b, tiny.y, tiny.item_features, users=tiny.users,
                                         user_ids=["u0", "u1", "u2", "u3", "quiet"])
    with pytest.raises(cz.DataError, match="users: user id 'quiet' has no labels"):
        cz.fit(cz.DPMCommunities(), silent)
    with pytest.raises(cz.DataError, match="membership"):
        cz.fit(cz.DPMCommunities(), tiny, membership="both")


def test_save_and_load_give_identical_predictions(tiny, tmp_path):
    model = cz.DPMCommunities(concentration_prior=dist.Gamma(torch.tensor(1.0, dtype=torch.float64),
                                                             torch.tensor(1.0, dtype=torch.float64)))
    post = cz.fit(model, tiny, method="gibbs", n_sweeps=30, burn_in=10, seed=2, progress_bar=False)
    assert post.trace["concentration"].std() > 0  # λ resampled (Escobar–West)
    a, b = tiny.item_ids[tiny.a], tiny.item_ids[tiny.b]
    users = np.asarray(tiny.user_ids, dtype=object)[tiny.users]
    users[:3] = "someone new"  # the CRP prior predictive, when asked for
    p = post.predict_proba(a, b, users=users, new_users="prior")
    assert np.all((p > 0) & (p < 1))
    post.save(tmp_path / "dpm.pt")
    back = cz.load(tmp_path / "dpm.pt")
    assert type(back) is type(post)
    assert np.array_equal(back.predict_proba(a, b, users=users, new_users="prior"), p)
    assert np.array_equal(back.utilities(users=["u0", "u3"])[0].to_numpy(),
                          post.utilities(users=["u0", "u3"])[0].to_numpy())
    assert back.memberships()[0].equals(post.memberships()[0])
    dt = back.to_arviz()
    assert dt.posterior["n_communities"].shape[:2] == (2, 20)
    assert dt.log_likelihood["y"].shape == (2, 20, tiny.n_pairs)


@pytest.mark.parametrize("n_inducing", [None, 5])
def test_community_ep_matches_nuts_on_a_fixed_partition(n_inducing):
    """One community holding every user (λ tiny for Gibbs, T = 1 for NUTS): the Gibbs route's EP
    posterior mean at the items against NUTS on the same GP (s fixed, the sparse conditional
    variance folded into the probit in both)."""
    data, _ = _communities(n_users=3, n_items=8, n_labels=8, n_comm=1, seed=2)
    kw = dict(kernel="se", lengthscale=[0.3, 0.3], shape_s0=1.0, rate_s0=0.25, n_inducing=n_inducing,
              item_residual=False)  # the paper's model; test_dpm_residual has the residual's
    g = cz.fit(cz.DPMCommunities(concentration=1e-8, **kw), data, method="gibbs", n_sweeps=2, burn_in=1,
               n_chains=1, progress_bar=False)
    assert g.counts.tolist() == [[3]]  # one community of all three users
    A, _ = g.setup.gp.item_terms()
    ep = g.means[0, 0] @ A.T
    nuts = cz.fit(cz.DPMCommunities(truncation=1, **kw), data, method="nuts", num_samples=1000,
                  warmup_steps=300, num_chains=1, seed=0)
    f = nuts.means[:, 0] @ A.T
    gap = float(((ep - f.mean(0)).abs() / f.std(0)).max())
    print(f"n_inducing={n_inducing}: largest |EP − NUTS| / NUTS sd {gap:.3f}")
    assert gap < 0.2


def test_svi_coclustering_matches_gibbs():
    """2 simulated communities, 12 users: the svi route (memberships summed out in the truncated
    program, T = 6), whole-batch and with mini-batches of 6 users, against Gibbs + EP."""
    data, truth = _communities(n_users=12, n_items=12, n_labels=10, n_comm=2, seed=0)
    model = cz.DPMCommunities(kernel="se", lengthscale=[0.3, 0.3], shape_s0=1.0, rate_s0=0.25, truncation=6)
    gibbs = cz.fit(model, data, method="gibbs", n_sweeps=200, burn_in=50, n_chains=2, progress_bar=False)
    co = gibbs.coclustering().numpy()
    same = truth[:, None] == truth[None, :]
    assert co[same].mean() > 0.8 and co[~same].mean() < 0.1
    for subsample_size in (None, 6):
        svi = cz.fit(model, data, method="svi", num_steps=1000 if subsample_size is None else 1500, lr=0.05,
                     n_draws=200, subsample_size=subsample_size, seed=0)
        diff = float(np.abs(svi.coclustering().numpy() - co).mean())
        print(f"subsample_size={subsample_size}: mean |svi − Gibbs| co-clustering {diff:.3f}")
        assert diff < 0.1
    co_svi, partition = svi.memberships()
    assert np.array_equal(np.diag(co_svi.to_numpy()), np.ones(12))
    assert partition.iloc[0] == 0  # labelled by first appearance
    assert abs(svi.n_communities().sum() - 1) < 1e-12
    p = svi.predict_proba(data.item_ids[data.a], data.item_ids[data.b], users=data.user_ids[data.users])
    assert np.mean((p > 0.5) == (data.y > 0.5)) > 0.7
    means, _ = svi.utilities(users=data.user_ids[:2])
    assert means.shape == (12, 2) and np.isfinite(means.to_numpy()).all()
    dt = svi.to_arviz()
    assert dt.log_likelihood["y"].shape == (1, 200, data.n_pairs)


def _brute_losses(z, cand):
    """Expected Binder and VI losses of partition ``cand`` over the partitions ``z`` (S, U), pair by
    pair and from entropies (sklearn's mutual information), not from the contingency shortcut."""
    from sklearn.metrics import mutual_info_score

    def entropy(x):
        p = np.bincount(x) / x.size
        p = p[p > 0]
        return float(-(p * np.log(p)).sum())

    binder = np.mean([np.abs((cand[:, None] == cand[None, :]).astype(float)
                             - (zs[:, None] == zs[None, :])).sum() / 2 for zs in z])
    vi = np.mean([entropy(cand) + entropy(zs) - 2 * mutual_info_score(cand, zs) for zs in z])
    return binder, vi


def test_point_partition_minimises_the_expected_binder_and_vi_losses():
    from crowdzoo.models.dpm.posterior import point_partition

    rng = np.random.default_rng(3)
    base = np.repeat([0, 1, 2], 4)
    z = np.stack([np.where(rng.random(12) < 0.3, rng.integers(0, 4, 12), base) for _ in range(40)])
    z = np.stack([np.unique(zs, return_inverse=True)[1] for zs in z])  # labels 0, 1, … as in the posterior
    zt = torch.as_tensor(z)
    w = torch.full((40,), 1 / 40, dtype=torch.float64)
    for k, loss in enumerate(("binder", "vi")):
        scores = [_brute_losses(z, z[s])[k] for s in range(40)]
        best = point_partition(zt, w, loss)
        assert scores[best] == pytest.approx(min(scores), abs=1e-12)
    # soft memberships (the svi/nuts routes): one-hot responsibilities give the hard answer
    r = torch.nn.functional.one_hot(zt, int(z.max()) + 1).to(torch.float64)
    assert point_partition(zt, w, "binder", r) == point_partition(zt, w, "binder")


def test_new_items_by_features_match_the_training_items(tiny):
    """predict_proba/utilities at item_features equal to the training rows give the training items'
    answers (without the item residual: with it a new item has a residual of its own, not a training
    item's); an unknown item id names the row and suggests item_features."""
    model = cz.DPMCommunities(lengthscale=[1.5, 1.5], item_residual=False)
    post = cz.fit(model, tiny, n_sweeps=20, burn_in=5, n_chains=1, progress_bar=False)
    X = tiny.item_features
    a, b = np.array([0, 2, 5]), np.array([1, 3, 0])
    users = ["u0", "u2", "nobody"]
    p_train = post.predict_proba(tiny.item_ids[a], tiny.item_ids[b], users=users, new_users="prior")
    p_new = post.predict_proba(a, b, users=users, item_features=X, new_users="prior")
    assert np.allclose(p_new, p_train, atol=1e-6)
    m_train = post.utilities(users=["u1"])[0].to_numpy()
    m_new = post.utilities(users=["u1"], item_features=X)[0].to_numpy()
    assert np.allclose(m_new, m_train, atol=1e-6)
    with pytest.raises(cz.DataError, match="row 0.*item_features"):
        post.predict_proba(["no such item"], [tiny.item_ids[0]])
    _, part = post.memberships(loss="vi")
    assert list(part.index) == list(tiny.user_ids)
    with pytest.raises(cz.DataError, match="loss"):
        post.memberships(loss="squared")


@pytest.mark.parametrize("ell_true", [pytest.param(0.1, marks=pytest.mark.slow), 1.0])  # 0.1: 10 s more
def test_svi_learns_the_item_length_scales(ell_true):
    """Learning the DPM's kernel: svi with learn_kernel=True makes the communities' item length-scales a
    pyro.param of the program. Communities drawn with ℓ = 0.1 and with ℓ = 1 (the median heuristic
    starts near 0.3 for both): the learned ℓ moves from it towards the truth, within a factor 2 of it."""
    from crowdzoo.data.simulate_dpm import simulate_communities

    data, _ = simulate_communities(n_users=20, n_items=25, n_labels=25, n_communities=2, lengthscale=ell_true,
                                   seed=0)
    post = cz.fit(cz.DPMCommunities(kernel="se", truncation=4), data, method="svi", num_steps=1500, lr=0.05,
                  learn_kernel=True, progress_bar=False)
    start, ell = np.array(post.settings["start_lengthscale"]), np.array(post.settings["learned_lengthscale"])
    print(f"truth {ell_true}: median heuristic {start.round(3)} → learned {ell.round(3)}")
    assert np.all(np.abs(np.log(ell / ell_true)) < np.log(2.0))
    assert np.all(np.abs(np.log(ell / ell_true)) < np.abs(np.log(start / ell_true)))
    np.testing.assert_allclose(post.model.lengthscale.numpy(), ell)
    np.testing.assert_allclose(post.setup.gp.kernel.lengthscale.numpy(), ell)
