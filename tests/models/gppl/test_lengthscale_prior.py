"""svi and nuts: GPPL's length-scales under a prior (``lengthscale_prior=``), sampled by NUTS and
covered by svi's guide, or point-estimated by svi (``learn_kernel=True``).

On a simulated ARD problem (f depends on the first of two features only) NUTS puts the relevant
dimension's length-scale clearly below the irrelevant one's; svi with the prior agrees with NUTS on it
and on held-out probabilities; svi's learned point estimate agrees with natgrad's. The per-draw
predictions equal a loop over draws, each with its own setup built from scratch. Bad requests refused.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pyro.distributions as dist
import pytest
import torch
from scipy.stats import norm

import crowdzoo as cz
from crowdzoo.errors import DataError
from crowdzoo.models.gppl.posterior import GPPLPosterior

PRIOR = dist.LogNormal(0.0, 1.0)
# the labels are near-deterministic where f differs most, so fit's confidence check would refit each
# fit without a tenth of them; what these tests compare is the fits themselves
QUIET = dict(progress_bar=False, check_confidence=False)


def _ard_problem(seed=0, n_items=25, n_pairs=300, n_test=300):
    """f = sin(1.5 x₀) on two features uniform on (−2, 2); y ~ Bernoulli(Φ(2 (f_a − f_b)))."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n_items, 2))
    f = np.sin(1.5 * X[:, 0])

    def pairs(n):
        a = rng.integers(n_items, size=n)
        b = (a + 1 + rng.integers(n_items - 1, size=n)) % n_items
        return a, b, (rng.random(n) < norm.cdf(2 * (f[a] - f[b]))).astype(float)

    a, b, y = pairs(n_pairs)
    return cz.PairwiseData.from_arrays(a, b, y, item_features=X), f, pairs(n_test)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def problem():
    return _ard_problem()


@pytest.fixture(scope="module")
def nuts(problem):
    data, _, _ = problem
    return cz.fit(cz.GPPL(kernel="se", lengthscale_prior=PRIOR), data, method="nuts", num_samples=100,
                  warmup_steps=100, num_chains=2, max_tree_depth=6)


@pytest.fixture(scope="module")
def svi(problem):
    data, _, _ = problem
    return cz.fit(cz.GPPL(kernel="se", lengthscale_prior=PRIOR), data, method="svi", num_steps=1000,
                  lr=0.02, n_draws=300, **QUIET)


def test_nuts_puts_the_shorter_lengthscale_on_the_relevant_dimension(nuts):
    """Posterior median ℓ₀ (f varies along x₀) at least three times below ℓ₁ (f is flat in x₁); the
    median heuristic gives both about 1.3."""
    med = nuts.lengthscales.median(0).values
    lo, hi = np.quantile(nuts.lengthscales[:, 0].numpy(), [0.05, 0.95])
    print(f"NUTS posterior median ℓ {med.numpy().round(3)}, ℓ₀ 90 % interval ({lo:.3f}, {hi:.3f}), "
          f"divergences {int(nuts.sample_stats['diverging'].sum())}")
    assert med[1] > 3 * med[0]
    assert hi < float(med[1])
    assert nuts.lengthscales.shape == (200, 2)


def test_svi_with_the_prior_agrees_with_nuts(problem, nuts, svi):
    """svi's (AutoMultivariateNormal over log ℓ, log s, u) posterior median of the relevant ℓ₀ within a
    factor 1.5 of NUTS's; held-out P(a ≻ b) within 0.03 on average, closer to NUTS than EP's posterior
    at the fixed median-heuristic length-scales is."""
    data, _, (at, bt, yt) = problem
    med_n, med_s = nuts.lengthscales.median(0).values, svi.lengthscales.median(0).values
    p_n, p_s = nuts.predict_proba(at, bt), svi.predict_proba(at, bt)
    fixed = cz.fit(cz.GPPL(kernel="se"), data, method="ep", **QUIET)  # ℓ fixed at the heuristic's
    p_f = fixed.predict_proba(at, bt)
    gap, gap_fixed = np.abs(p_s - p_n).mean(), np.abs(p_f - p_n).mean()
    print(f"posterior median ℓ: NUTS {med_n.numpy().round(3)}, svi {med_s.numpy().round(3)}; held-out "
          f"|Δp| to NUTS: svi with the prior {gap:.4f}, EP at the median heuristic {gap_fixed:.4f}")
    assert 1 / 1.5 < float(med_s[0] / med_n[0]) < 1.5
    assert med_s[1] > 2.5 * med_s[0]
    assert gap < 0.03
    assert gap < gap_fixed


def test_svi_learn_kernel_agrees_with_natgrad(problem):
    """``learn_kernel=True`` without a prior (ℓ a pyro.param, started at the median heuristic) shortens
    the relevant length-scale and lengthens the irrelevant one, as natgrad's learned kernel does: ℓ₀
    within 25 % of natgrad's, both at least three times below ℓ₁; the posterior's setup and model carry
    the learned values."""
    data, _, _ = problem
    post = cz.fit(cz.GPPL(kernel="se"), data, method="svi", learn_kernel=True, num_steps=1000, lr=0.05,
                  **QUIET)
    ng = cz.fit(cz.GPPL(kernel="se"), data, method="natgrad", learn_kernel=True, **QUIET)
    ell, ell_ng = np.array(post.settings["learned_lengthscale"]), np.array(ng.settings["learned_lengthscale"])
    start = np.array(post.settings["start_lengthscale"])
    print(f"median heuristic {start.round(3)}; learned ℓ: svi {ell.round(3)}, natgrad {ell_ng.round(3)}")
    assert abs(ell[0] / ell_ng[0] - 1) < 0.25
    for learned in (ell, ell_ng):  # ℓ₀ shortened, ℓ₁ lengthened from the median heuristic
        assert (np.sign(np.log(learned / start)) == [-1, 1]).all()
    assert ell[1] > 3 * ell[0] and ell_ng[1] > 3 * ell_ng[0]
    np.testing.assert_allclose(post.setup.kernel.lengthscale.numpy(), ell)
    np.testing.assert_allclose(post.model.lengthscale.numpy(), ell)
    assert post.lengthscales is None  # one point estimate: the single-setup path


def _loop_over_draws(post, a, b, item_features=None):
    """P(a ≻ b) averaged over draws, each draw a one-component posterior of the fixed-ℓ code path
    (SparseGP's item and pair algebra) on its own setup, factorised here: L L ᵀ = K_mm + jitter · I."""
    from crowdzoo.gp.kernels import Kernel
    from crowdzoo.models.gppl.model import GPPLSetup

    X, Z = post.setup.X, post.setup.Z
    out = []
    for g in range(post.means.shape[0]):
        kern = Kernel("se", post.lengthscales[g])
        K = kern(Z, Z)
        L = torch.linalg.cholesky(K + post.model.jitter * torch.eye(Z.shape[0], dtype=K.dtype))
        B = torch.linalg.solve_triangular(L, kern(Z, X), upper=False)
        setup = GPPLSetup(kernel=kern, X=X, Z=Z, K_mm=K, L_mm=L, B=B, exact=post.setup.exact,
                          jitter=post.model.jitter)
        residual = {} if post.r_means is None else {"r_means": post.r_means[g:g + 1],
                                                     "s_r": post.s_r[g:g + 1]}
        one = GPPLPosterior(model=post.model, setup=setup, data=post.data, method="x",
                            means=post.means[g:g + 1], covs=None, s=post.s[g:g + 1], **residual)
        out.append(one.predict_proba(a, b, item_features=item_features))
    return np.mean(out, axis=0)


@pytest.mark.parametrize("n_inducing", [None, 8])
def test_per_draw_predictions_equal_a_loop_over_draws(problem, n_inducing):
    """The batched per-draw algebra (exact, and sparse with 8 inducing items, where the conditional
    variance c enters) equals a plain loop over draws through the fixed-ℓ code path to 1e-10, at training
    and at new items; P(a ≻ b) + P(b ≻ a) = 1; the
    utilities' mean is the mean of ``sample``'s draws."""
    data, _, (at, bt, _) = problem
    post = cz.fit(cz.GPPL(kernel="se", n_inducing=n_inducing, lengthscale_prior=PRIOR), data, method="svi",
                  num_steps=200, lr=0.02, n_draws=20, **QUIET)
    assert post.lengthscales.shape == (20, 2) and post.lengthscales.std(0).min() > 0
    a, b = at[:40], bt[:40]
    p = post.predict_proba(a, b)
    np.testing.assert_allclose(p, _loop_over_draws(post, a, b), atol=1e-10)
    np.testing.assert_allclose(p + post.predict_proba(b, a), 1.0, atol=1e-12)
    new = np.random.default_rng(1).uniform(-2, 2, size=(6, 2))
    ia, ib = np.array([0, 1, 2, 3]), np.array([4, 5, 0, 1])
    np.testing.assert_allclose(post.predict_proba(ia, ib, item_features=new),
                               _loop_over_draws(post, ia, ib, item_features=new), atol=1e-10)
    mean, var = post.utilities()
    draws = post.sample(20)
    np.testing.assert_allclose(mean.to_numpy(), draws["f"].mean(0).numpy(), atol=1e-10 if n_inducing is None
                               else 3 * float(var.max()) ** 0.5)
    assert torch.equal(draws["lengthscale"], post.lengthscales)


def test_arviz_and_report_show_the_lengthscales(nuts, tmp_path):
    """The ArviZ tree has ``lengthscale`` (chain, draw, dim) with finite r̂ and ESS, among the identified
    variables that the report summarises; save/load keeps the per-draw predictions."""
    import arviz_stats as azs

    from crowdzoo.diagnostics.report import _summary

    dt = nuts.to_arviz()
    ell = dt.posterior["lengthscale"]
    assert ell.dims == ("chain", "draw", "dim") and ell.shape == (2, 100, 2)
    summ = azs.summary(dt, var_names=["lengthscale"], round_to="none")
    rhat, ess = summ["r_hat"].to_numpy(), summ["ess_bulk"].to_numpy()
    print(f"lengthscale r̂ {rhat.round(3)}, bulk ESS {ess.round(0)}")
    assert np.isfinite(summ["r_hat"].to_numpy()).all() and (summ["r_hat"].to_numpy() < 1.2).all()
    assert np.isfinite(summ["ess_bulk"].to_numpy()).all()
    assert any("lengthscale" in str(i) for i in _summary(dt).index)
    nuts.save(tmp_path / "p.pt")
    back = cz.load(tmp_path / "p.pt")
    ids = nuts.data.item_ids
    np.testing.assert_array_equal(back.predict_proba(ids[:5], ids[5:10]),
                                  nuts.predict_proba(ids[:5], ids[5:10]))


def test_bad_requests_are_refused(problem):
    data, _, _ = problem
    with pytest.raises(DataError, match="lengthscale_prior"):
        cz.GPPL(lengthscale_prior=dist.Normal(0.0, 1.0))  # not positive
    with pytest.raises(DataError, match="lengthscale_prior"):
        cz.GPPL(lengthscale_prior=2.0)  # not a distribution
    with pytest.raises(DataError, match="lengthscale_prior"):  # three dimensions' prior on two
        cz.fit(cz.GPPL(kernel="se", lengthscale_prior=dist.LogNormal(torch.zeros(3), 1.0)), data,
               method="svi", num_steps=1)
    with pytest.raises(DataError, match="lengthscale_prior"):  # a kernel whose ℓ the model does not set
        cz.fit(cz.GPPL(kernel=lambda x1, x2: torch.exp(-torch.cdist(x1, x2)), lengthscale_prior=PRIOR), data,
               method="svi", num_steps=1)
    bare = cz.PairwiseData.from_arrays(data.a, data.b, data.y, item_features=np.zeros((data.n_items, 0)))
    with pytest.raises(DataError, match="lengthscale_prior"):  # no features, no length-scales
        cz.fit(cz.GPPL(lengthscale_prior=PRIOR), bare, method="nuts")
    with pytest.raises(DataError, match="learn_kernel"):
        cz.fit(cz.GPPL(), bare, method="svi", learn_kernel=True, num_steps=1)
    for method in ("natgrad", "ep"):  # either with learn_kernel=False (ep's default) would ignore the prior
        with pytest.raises(DataError, match="lengthscale_prior"):
            cz.fit(cz.GPPL(kernel="se", lengthscale_prior=PRIOR), data, method=method, learn_kernel=False)
    with pytest.raises(DataError, match="learn_kernel"):
        cz.fit(cz.GPPL(kernel="se", lengthscale_prior=PRIOR), data, method="svi", learn_kernel=True,
               num_steps=1)
    with pytest.raises(DataError, match="learn_kernel"):  # NUTS samples ℓ only under a prior
        cz.fit(cz.GPPL(kernel="se"), data, method="nuts", learn_kernel=True)
    crowd = cz.PairwiseData.from_arrays(data.a, data.b, data.y, users=np.arange(data.n_pairs) % 3,
                                        item_features=data.item_features)
    with pytest.raises(DataError, match="lengthscale_prior"):  # collabGP's ep route keeps ℓ fixed
        cz.fit(cz.CollabGP(n_latent=2, lengthscale_prior=PRIOR), crowd, method="ep", max_iter=1)
    with pytest.raises(DataError, match="lengthscale_prior"):  # crowdGPPL's natgrad needs learn_kernel for it
        cz.fit(cz.CrowdGPPL(n_components=2, lengthscale_prior=PRIOR), crowd, method="natgrad", max_iter=1)
    with pytest.raises(DataError, match="lengthscale_prior"):
        cz.CrowdGPPL(lengthscale_prior=dist.Normal(0.0, 1.0))


def test_fixed_lengthscales_keep_the_fixed_program(problem):
    """Without a prior the Pyro program is the fixed-ℓ model, with no lengthscale site."""
    from crowdzoo.models.gppl.model import gppl_lengthscale_model, gppl_model

    data, _, _ = problem
    model = cz.GPPL(kernel="se")
    setup = model.setup(data)
    assert model.program(setup, data)[0] is gppl_model
    fn, args = dataclasses.replace(model, lengthscale_prior=PRIOR).program(setup, data)
    assert fn is gppl_lengthscale_model
    assert args[0].prior.event_shape == (2,)
