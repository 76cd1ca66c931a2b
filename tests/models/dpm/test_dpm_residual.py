"""The DPM's item residual: each community's item kernel K/s + σ_r² I, so that items whose features are
identical (which the kernel alone must give one utility) can still differ, and a new item keeps its own
residual variance σ_r² in the predictive."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import crowdzoo as cz
from crowdzoo.errors import DataError


def _twins(seed=0, n_twins=6, n_users=4, per_user=60):
    """Items 2k and 2k+1 lie 0.02 apart in the features (ℓ = 0.5: a kernel correlation of 0.9996, so the
    kernel alone gives them all but one utility); 2k+1 is the better one by 1.5 probit units, and items
    of different twins differ smoothly in the features."""
    rng = np.random.default_rng(seed)
    X = np.repeat(rng.uniform(-1, 1, size=(n_twins, 2)), 2, axis=0)
    X[1::2, 0] += 0.02
    f = np.sin(2 * X[:, 0]) + np.tile([-0.75, 0.75], n_twins)
    n = n_users * per_user
    a = rng.integers(0, 2 * n_twins, n)
    b = np.where(rng.random(n) < 0.5, a ^ 1, rng.integers(0, 2 * n_twins, n))  # half the labels within a twin
    keep = a != b
    a, b = a[keep], b[keep]
    y = (rng.standard_normal(a.size) < f[a] - f[b]).astype(float)  # probit labels, P(a ≻ b) = Φ(f_a − f_b)
    data = cz.PairwiseData.from_arrays(a, b, y, X, users=np.arange(a.size) % n_users)
    return data, f


def _fit(data, item_residual):
    model = cz.DPMCommunities(concentration=1e-8, kernel="se", lengthscale=[0.5, 0.5],
                              item_residual=item_residual)
    return cz.fit(model, data, method="gibbs", n_sweeps=3, burn_in=1, n_chains=1, seed=0,
                  progress_bar=False, check_confidence=False)


def test_setup_adds_the_residual_variance_to_the_exact_item_kernel():
    data, _ = _twins()
    plain = cz.DPMCommunities(kernel="se", lengthscale=[0.5, 0.5], item_residual=False).setup(data)
    model = cz.DPMCommunities(kernel="se", lengthscale=[0.5, 0.5], item_residual=True)
    st = model.setup(data)
    assert model.residual_variance == 0.25  # 1 / E[s_r] under GPPL's Gamma(2, 0.5)
    torch.testing.assert_close(st.K, plain.K + 0.25 * torch.eye(plain.M, dtype=plain.K.dtype))
    # training items: B = L⁻¹ K_mm reproduces K_mm (= Bᵀ B), so f = A f_m is the identity at them
    torch.testing.assert_close(st.gp.B.T @ st.gp.B, st.gp.K_mm)
    # a new item: cross-covariance k(x, X)/s without a residual (distinct items), own variance
    # k(x, x)/s + σ_r², so its conditional variance is k/s + σ_r² − k_xmᵀ (K/s + σ_r² I)⁻¹ k_xm
    Xn = torch.tensor([[0.1, -0.2], [0.7, 0.3]], dtype=st.K.dtype)
    _, c = st.gp.item_terms(Xn)
    k_xm = plain.gp.kernel(Xn, plain.gp.X) / plain.s
    k_xx = plain.gp.kernel.diag(Xn) / plain.s
    want = k_xx + 0.25 - (k_xm @ torch.linalg.solve(plain.K + 0.25 * torch.eye(plain.M, dtype=st.K.dtype),
                                                      k_xm.T)).diagonal()
    torch.testing.assert_close(c / st.s, want)


def test_residual_separates_twins_the_features_cannot(tmp_path):
    data, f = _twins()
    ids = data.item_ids
    better, worse = ids[1::2], ids[0::2]
    post = _fit(data, True)
    p_res = post.predict_proba(better, worse)
    post.save(tmp_path / "dpm.pt")
    np.testing.assert_array_equal(cz.load(tmp_path / "dpm.pt").predict_proba(better, worse), p_res)
    p_plain = _fit(data, False).predict_proba(better, worse)
    print("P(2k+1 ≻ 2k): residual", np.round(p_res, 3), "no residual", np.round(p_plain, 3))
    assert np.all(np.abs(p_plain - 0.5) < 0.05)  # one utility per feature vector
    assert np.all(p_res > 0.8)  # the true probability is Φ(1.5) ≈ 0.93


def test_residual_is_refused_on_a_sparse_item_side_and_with_learned_lengthscales():
    data, _ = _twins()
    with pytest.raises(DataError, match="item_residual"):
        cz.DPMCommunities(n_inducing=4, item_residual=True).setup(data)
    with pytest.raises(DataError, match="item_residual"):
        cz.DPMCommunities(item_residual="yes")
    model = cz.DPMCommunities(kernel="se", item_residual=True)
    with pytest.raises(DataError, match="item_residual"):
        model.program(model.setup(data), data, learn_kernel=True)


def test_gibbs_and_nuts_fit_one_community_with_the_residual_alike():
    """One community of every user (λ tiny for Gibbs, T = 1 for NUTS) on the twins: the Gibbs route's
    EP posterior mean of the items' utilities against NUTS on the same kernel K/s + σ_r² I."""
    data, _ = _twins(n_twins=4, n_users=3, per_user=20)
    kw = dict(kernel="se", lengthscale=[0.5, 0.5], item_residual=True)
    g = cz.fit(cz.DPMCommunities(concentration=1e-8, **kw), data, method="gibbs", n_sweeps=2, burn_in=1,
               n_chains=1, progress_bar=False, check_confidence=False)
    assert g.counts.tolist() == [[3]]
    A, _ = g.setup.gp.item_terms()
    ep = g.means[0, 0] @ A.T
    nuts = cz.fit(cz.DPMCommunities(truncation=1, **kw), data, method="nuts", num_samples=600,
                  warmup_steps=300, num_chains=1, seed=0)
    f = nuts.means[:, 0] @ A.T
    gap = float(((ep - f.mean(0)).abs() / f.std(0)).max())
    twin_gap = float((f[:, 1::2] - f[:, 0::2]).mean())
    print(f"largest |EP − NUTS| / NUTS sd {gap:.3f}; NUTS's mean f_2k+1 − f_2k {twin_gap:.2f}")
    assert gap < 0.2 and twin_gap > 0.5


def test_auto_has_the_residual_exactly_where_it_applies():
    """``item_residual="auto"``: on with every item inducing over item features and fixed length-scales;
    off, without an error, on a sparse item side, under a length-scale prior, for learned length-scales
    and for items without features (the identity kernel, which the residual would only rescale). The
    default learns σ_r² where "auto" has the residual; False is the paper's model, without it."""
    import pyro.distributions as dist

    from crowdzoo.models.dpm.setup import ResidualKernel

    data, _ = _twins()
    assert cz.DPMCommunities().item_residual == "learned"

    def has(model, d=data):
        return isinstance(model.setup(d).gp.kernel, ResidualKernel)

    exact = cz.DPMCommunities(kernel="se", lengthscale=[0.5, 0.5], item_residual="auto")
    assert has(exact) and has(cz.DPMCommunities(item_residual="auto"))
    assert not has(cz.DPMCommunities(item_residual=False))
    st = exact.setup(data)
    on = cz.DPMCommunities(kernel="se", lengthscale=[0.5, 0.5], item_residual=True)
    torch.testing.assert_close(st.K, on.setup(data).K)
    assert not has(cz.DPMCommunities(n_inducing=4, item_residual="auto"))
    prior = dist.LogNormal(torch.tensor(0.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64))
    assert not has(cz.DPMCommunities(kernel="se", lengthscale_prior=prior, item_residual="auto"))
    featureless = cz.PairwiseData.from_arrays(data.a, data.b, data.y, np.zeros((data.n_items, 0)),
                                              users=data.users)
    assert not has(cz.DPMCommunities(item_residual="auto"), featureless)
    # svi's learn_kernel: the program rebuilds the kernel from ℓ, and the learned model has no residual
    fn, _ = exact.program(st, data, learn_kernel=True)
    assert fn.__name__ == "dpm_lengthscale_model"
    a, b = (torch.as_tensor(x) for x in (data.a, data.b))
    learned, lst = exact.with_lengthscale(st, torch.tensor([0.4, 0.6], dtype=torch.float64), a, b)
    assert learned.item_residual is False and not isinstance(lst.gp.kernel, ResidualKernel)
    assert learned.resolved(lst) is learned


def test_the_posterior_keeps_which_kernel_auto_used(tmp_path):
    data, _ = _twins(n_twins=3, n_users=2, per_user=20)
    kw = dict(n_sweeps=2, burn_in=1, n_chains=1, progress_bar=False, check_confidence=False)
    on = cz.fit(cz.DPMCommunities(item_residual="auto"), data, method="gibbs", **kw)
    off = cz.fit(cz.DPMCommunities(n_inducing=4, item_residual="auto"), data, method="gibbs", **kw)
    assert on.model.item_residual is True and off.model.item_residual is False
    svi = cz.fit(cz.DPMCommunities(truncation=2, item_residual="auto"), data, method="svi", num_steps=5,
                 n_draws=4, progress_bar=False, check_confidence=False)
    assert svi.model.item_residual is True
    on.save(tmp_path / "on.pt")
    back = cz.load(tmp_path / "on.pt")
    assert back.model.item_residual is True and back.model == on.model
    a, b = data.item_ids[1::2], data.item_ids[0::2]
    np.testing.assert_array_equal(back.predict_proba(a, b), on.predict_proba(a, b))


def test_the_command_line_and_the_api_build_the_same_model(tmp_path):
    """``crowdzoo fit dpm`` without ``--item-residual`` is ``DPMCommunities()`` (σ_r² learned), and
    ``--item-residual auto`` / ``on`` / ``off`` are ``item_residual="auto"`` / True / False: the same
    resolved model and kernel as the API's fit."""
    from crowdzoo.cli import main
    from crowdzoo.cli.parser import model_defaults_help

    assert "dpm: --item-residual learned" in model_defaults_help()
    data, _ = _twins(n_twins=3, n_users=2, per_user=20)
    data.to_frame().to_csv(tmp_path / "pairs.csv", index=False)
    data.items_frame().rename_axis("id").to_csv(tmp_path / "items.csv")
    for flag, setting in (([], "learned"), (["--item-residual", "auto"], "auto"),
                          (["--item-residual", "on"], True)):
        api = cz.fit(cz.DPMCommunities(item_residual=setting), data, method="gibbs", n_sweeps=2, burn_in=1,
                     progress_bar=False, check_confidence=False)
        out = tmp_path / f"run{setting}"
        code = main(["fit", "dpm", "--pairs", str(tmp_path / "pairs.csv"), "--items",
                     str(tmp_path / "items.csv"), "--n-sweeps", "2", "--burn-in", "1", "--out", str(out),
                     "--no-progress", *flag])
        assert code == 0
        post = cz.load(out / "posterior.pt")
        resolved = "learned" if setting == "learned" else (setting is not False)
        assert post.model == api.model and post.model.item_residual == resolved
        torch.testing.assert_close(post.setup.K, api.setup.K)


# ---------------------------------------------------------------- the residual's variance learned
def _item_effects_crowd(residual_sd, seed=0, n_items=40, n_users=8, n_labels=4000):
    """Items on a line whose utilities are sin(2x) plus an effect of each item's own, N(0, residual_sd²),
    that the features do not carry; probit labels P(a ≻ b) = Φ(f_a − f_b) from users who share them."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n_items, 1))
    f = np.sin(2 * X[:, 0]) + residual_sd * rng.standard_normal(n_items)
    a = rng.integers(0, n_items, n_labels)
    b = (a + rng.integers(1, n_items, n_labels)) % n_items
    y = (rng.standard_normal(n_labels) < f[a] - f[b]).astype(float)
    return cz.PairwiseData.from_arrays(a, b, y, X, users=np.arange(n_labels) % n_users)


def _learned(**kw):
    return cz.DPMCommunities(concentration=1e-8, kernel="se", lengthscale=[0.5], item_residual="learned",
                             **kw)


def test_learned_residual_variance_finds_the_item_effects_scale_and_switches_off_without_them():
    """Item effects of variance 1 that the features do not carry: σ_r² learned within a factor of 4 of
    1; the same crowd without them: σ_r² at most 1/64 (0, the residual off, on the grid)."""
    strong = _learned().setup(_item_effects_crowd(1.0))
    none = _learned().setup(_item_effects_crowd(0.0))
    print("σ_r² learned: item effects of variance 1", strong.residual_variance, "none",
          none.residual_variance)
    assert 0.25 <= strong.residual_variance <= 4.0
    assert none.residual_variance <= 1 / 64
    # the setup's kernel is the one learned: K/s + σ_r² I
    plain = cz.DPMCommunities(kernel="se", lengthscale=[0.5], item_residual=False)
    plain = plain.setup(_item_effects_crowd(1.0))
    torch.testing.assert_close(strong.K, plain.K + strong.residual_variance * torch.eye(plain.M,
                                                                                         dtype=plain.K.dtype))


def test_learned_residual_evidence_matches_a_quadrature_of_the_marginal_likelihood():
    """Three items, the first two 0.05 apart in the features (one utility to the kernel alone) whose labels
    disagree: the pooled EP log evidence at each σ_r² of the grid against log ∫ Π_p Φ(±(f_a − f_b))
    N(f; 0, K/s + σ_r² I) df by a 2-D grid quadrature over the two utility differences, which are all
    the labels see; the learned σ_r² is where the quadrature is largest, up to the grid's ties."""
    X = np.array([[0.0], [0.05], [1.0]])
    pairs = [(1, 0, 13, 3), (2, 0, 9, 6), (2, 1, 6, 8)]  # (a, b, a wins, b wins)
    a, b, y = [], [], []
    for i, j, wi, wj in pairs:
        a += [i] * (wi + wj)
        b += [j] * (wi + wj)
        y += [1.0] * wi + [0.0] * wj
    data = cz.PairwiseData.from_arrays(np.array(a), np.array(b), np.array(y), X, users=np.zeros(len(a), int))
    st = _learned().setup(data)
    K0 = cz.DPMCommunities(kernel="se", lengthscale=[0.5], item_residual=False).setup(data).K
    D = torch.tensor([[-1.0, 1.0, 0.0], [-1.0, 0.0, 1.0]], dtype=K0.dtype)  # (f1 − f0, f2 − f0)
    z = torch.linspace(-9, 9, 721, dtype=K0.dtype)
    Z = torch.stack(torch.meshgrid(z, z, indexing="ij"), -1).reshape(-1, 2)
    w = torch.exp(-0.5 * (Z ** 2).sum(-1)) / (2 * np.pi) * float(z[1] - z[0]) ** 2
    row = {(1, 0): torch.tensor([1.0, 0.0]), (2, 0): torch.tensor([0.0, 1.0]),
           (2, 1): torch.tensor([-1.0, 1.0])}
    exact = []
    for v in st.residual_grid.tolist():
        C = torch.linalg.cholesky(D @ (K0 + v * torch.eye(3, dtype=K0.dtype)) @ D.T)
        d = Z @ C.T  # the differences at the nodes
        ll = torch.zeros(Z.shape[0], dtype=K0.dtype)
        for i, j, wi, wj in pairs:
            diff = d @ row[(i, j)].to(K0.dtype)
            ll += wi * torch.special.log_ndtr(diff) + wj * torch.special.log_ndtr(-diff)
        exact.append(float(torch.logsumexp(ll + torch.log(w), 0)))
    exact = torch.tensor(exact, dtype=K0.dtype)
    print("σ_r²", st.residual_grid.tolist(), "\nEP", st.residual_log_evidence.numpy().round(3),
          "\nquadrature", exact.numpy().round(3))
    torch.testing.assert_close(st.residual_log_evidence, exact, atol=0.01, rtol=0)
    assert 0 < st.residual_variance < 4  # an interior maximum: the twins need some residual
    best = int(torch.argmax(exact))
    assert exact[st.residual_grid == st.residual_variance].item() > exact[best].item() - 0.03


def test_learned_residual_posterior_keeps_it_and_without_item_effects_is_the_plain_model(tmp_path):
    kw = dict(method="gibbs", n_sweeps=3, burn_in=1, n_chains=1, seed=0, progress_bar=False,
              check_confidence=False)
    data = _item_effects_crowd(1.0, n_labels=1500)
    post = cz.fit(_learned(), data, **kw)
    v = post.setup.residual_variance
    assert post.model.item_residual == "learned" and v == _learned().setup(data).residual_variance and v > 0
    post.save(tmp_path / "learned.pt")
    back = cz.load(tmp_path / "learned.pt")
    assert back.model == post.model and back.setup.residual_variance == v
    torch.testing.assert_close(back.setup.residual_log_evidence, post.setup.residual_log_evidence)
    ia, ib = data.item_ids[:20], data.item_ids[20:]
    np.testing.assert_array_equal(back.predict_proba(ia, ib), post.predict_proba(ia, ib))
    dt = post.to_arviz()
    assert dt.attrs["learned_residual_variance"] == v
    ev = dt["residual_evidence"].to_dataset()["log_evidence"]
    assert float(ev["residual_variance"][int(np.argmax(ev.values))]) == v
    # no item effects: the evidence switches the residual off, and the fit is the one without it
    flat = _item_effects_crowd(0.0, n_labels=1500)
    off = cz.fit(_learned(), flat, **kw)
    plain = cz.fit(cz.DPMCommunities(concentration=1e-8, kernel="se", lengthscale=[0.5]), flat, **kw)
    assert off.setup.residual_variance == 0.0 and off.model.item_residual == "learned"
    np.testing.assert_array_equal(off.predict_proba(ia, ib), plain.predict_proba(ia, ib))
