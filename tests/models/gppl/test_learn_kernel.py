"""GPPL learns the kernel's length-scales (ARD).

EP maximises the EP evidence (and s): the evidence's gradient with the sites held at the EP fixed point
against finite differences of the converged evidence; a known ARD truth recovered. natgrad interleaves
Adam steps on log ℓ with its natural-gradient steps: q carried across a change of kernel keeps its
whitened form (an identity); the bound rises; the learned values agree with EP's within 20 %; a known
ARD truth recovered; checkpoints resume bit for bit. Bad requests refused."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from scipy.stats import norm

import crowdzoo as cz
from crowdzoo.data.tensors import label_tensors
from crowdzoo.errors import DataError
from crowdzoo.gp.conditional import probit_rows
from crowdzoo.gp.linalg import cholesky
from crowdzoo.inference.ep import ep_fixed_s, ep_log_evidence


@pytest.mark.parametrize("kernel", ["se", "matern32"])
def test_ep_evidence_gradient_matches_finite_differences(kernel):
    """∂ log Z_EP / ∂ log ℓ_d by autograd, sites fixed at the converged EP, equals the central finite
    difference of the evidence with EP rerun to convergence at ℓ e^{±ε} (relative error < 1e-5)."""
    data, _ = cz.simulate_gppl(n_items=25, n_pairs=200, n_features=2, s=1.0, seed=3)
    model = cz.GPPL(kernel=kernel)
    a, b, y = label_tensors(data)
    sgn = 2 * y - 1

    def evidence(log_ell, sites=None):
        setup = dataclasses.replace(model, lengthscale=log_ell.exp()).setup(data)
        K, H = setup.K_mm, probit_rows(setup, a, b, 1.0)
        if sites is None:
            with torch.no_grad():
                return ep_fixed_s(K, H, sgn, tol=1e-12, max_iter=3000)
        return ep_log_evidence(cholesky(K, jitter=setup.jitter), H, sgn, *sites)

    log_ell = torch.tensor([0.1, -0.3], dtype=torch.float64, requires_grad=True)
    _, _, tau, nu, log_Z, _ = evidence(log_ell.detach())
    f = evidence(log_ell, (tau, nu))
    assert abs(float(f.detach()) - log_Z) < 1e-10
    (grad,) = torch.autograd.grad(f, log_ell)
    eps = 1e-5
    for d in range(2):
        e = torch.zeros(2, dtype=torch.float64)
        e[d] = eps
        fd = (evidence(log_ell.detach() + e)[4] - evidence(log_ell.detach() - e)[4]) / (2 * eps)
        print(f"{kernel} d={d}: autograd {float(grad[d]):.8f}, finite difference {fd:.8f}")
        assert abs(float(grad[d]) - fd) < 1e-5 * max(1.0, abs(fd))


def _ard_problem(seed=0, n_items=80, n_pairs=800):
    """f depends on the first of two features only: f = sin(1.5 x₀)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n_items, 2))
    f = np.sin(1.5 * X[:, 0])
    a = rng.integers(n_items, size=n_pairs)
    b = (a + 1 + rng.integers(n_items - 1, size=n_pairs)) % n_items
    y = (rng.random(n_pairs) < norm.cdf(2 * (f[a] - f[b]))).astype(float)
    return cz.PairwiseData.from_arrays(a, b, y, item_features=X), f


def test_learned_lengthscales_recover_a_known_ard_truth(tmp_path):
    """The relevant feature gets a length-scale at least three times shorter than the irrelevant one
    (the median heuristic gives both about the same), the learned kernel's evidence is higher than the
    median heuristic's at the same s, and the posterior's model carries the learned values (they
    survive save/load)."""
    data, f = _ard_problem()
    post = cz.fit(cz.GPPL(kernel="se"), data, method="ep", learn_kernel=True)
    ell = np.array(post.settings["learned_lengthscale"])
    start = np.array(post.settings["start_lengthscale"])
    print(f"median heuristic {start.round(3)}, learned {ell.round(3)}, s {post.settings['learned_s']:.3f}")
    assert ell[1] > 3 * ell[0]
    np.testing.assert_allclose(post.model.lengthscale.numpy(), ell)
    a, b, y = label_tensors(data)
    s = post.settings["learned_s"]

    def converged(model):
        setup = model.setup(data)
        return ep_fixed_s(setup.K_mm / s, probit_rows(setup, a, b, s), 2 * y - 1, tol=1e-10)[4]

    learned, heuristic = converged(post.model), converged(dataclasses.replace(post.model, lengthscale=None))
    print(f"log Z_EP at s = {s:.3f}: learned {learned:.3f}, median heuristic {heuristic:.3f}")
    assert learned > heuristic
    post.save(tmp_path / "p.pt")
    back = cz.load(tmp_path / "p.pt")
    np.testing.assert_allclose(back.predict_proba(data.item_ids[:5], data.item_ids[5:10]),
                               post.predict_proba(data.item_ids[:5], data.item_ids[5:10]))


def _sine_problem():
    rng = np.random.default_rng(0)
    N = 100
    X = rng.uniform(-2, 2, size=(N, 3))
    f = np.sin(X[:, 0]) + 0.5 * np.cos(2 * X[:, 1]) + 0.3 * X[:, 0] * X[:, 2]

    def pairs(n):
        a = rng.integers(N, size=n)
        b = (a + 1 + rng.integers(N - 1, size=n)) % N
        return a, b, (rng.random(n) < norm.cdf(f[a] - f[b])).astype(float)

    (a, b, y), (at, bt, yt) = pairs(1000), pairs(1000)
    return cz.PairwiseData.from_arrays(a, b, y, item_features=X), f, (at, bt, yt)


@pytest.fixture(scope="module")
def sine_problem():
    return _sine_problem()


@pytest.mark.parametrize("method", ["ep", "natgrad"])
def test_learned_kernel_beats_the_median_heuristic_on_the_sine_problem(sine_problem, method):
    """The sine problem (N = 100, D = 3 uniform on (−2, 2), f = sin x₀ + 0.5 cos 2x₁ + 0.3 x₀x₂, 1000
    training and 1000 held-out pairs, y ~ Bernoulli(Φ(f_a − f_b))): with the SE kernel learned, Kendall
    τ against the true f and the held-out CEE are better than with the median heuristic (for
    reference, BoTorch's PairwiseGP scores τ .930, CEE .394 on another draw of this problem)."""
    from scipy.stats import kendalltau

    data, f, (at, bt, yt) = sine_problem
    scores = {}
    for learn in (False, True):
        kw = dict(likelihood="exact") if method == "natgrad" else {}
        post = cz.fit(cz.GPPL(kernel="se"), data, method=method, learn_kernel=learn, progress_bar=False, **kw)
        p = post.predict_proba(at, bt)
        cee = -np.mean(yt * np.log(p) + (1 - yt) * np.log1p(-p))
        tau = kendalltau(post.utilities()[0].to_numpy(), f)[0]
        scores[learn] = (tau, cee)
        print(f"{method} learn_kernel={learn}: Kendall τ {tau:.3f}, held-out CEE {cee:.3f}, accuracy "
              f"{np.mean((p > 0.5) == yt):.3f}, length-scales {post.settings.get('learned_lengthscale')}")
    assert scores[True][0] > scores[False][0] + 0.01
    assert scores[True][1] < scores[False][1]


@pytest.mark.parametrize("method", ["ep", "natgrad"])
def test_learn_kernel_refuses_what_it_cannot_learn(method):
    data, _ = cz.simulate_gppl(n_items=10, n_pairs=40, n_features=0, seed=1)
    with pytest.raises(DataError, match="learn_kernel"):
        cz.fit(cz.GPPL(), data, method=method, learn_kernel=True)
    data, _ = _ard_problem(n_items=20, n_pairs=60)
    with pytest.raises(DataError, match="learn_kernel"):
        cz.fit(cz.GPPL(kernel=lambda x1, x2: torch.exp(-torch.cdist(x1, x2))), data, method=method,
               learn_kernel=True)
    if method == "natgrad":
        with pytest.raises(DataError, match="learn_inducing"):
            cz.fit(cz.GPPL(kernel="se"), data, method=method, learn_inducing=True)
        with pytest.raises(DataError, match="rho_min"):
            cz.fit(cz.GPPL(kernel="se"), data, method=method, learn_kernel=True, rho_min=2.0)


def test_natgrad_learned_lengthscales_match_ep_within_20_percent(sine_problem):
    """The two routes climb different objectives (EP's evidence with s point-estimated; the bound of
    Eq. 30 with q(s)) to nearby length-scales: every learned ℓ_d of natgrad within 20 % of EP's, at
    tol = 1e-5. (At the default 1e-4 the fit stops while ℓ₂ still creeps along a flat bound: 3.5
    against EP's 4.55, with the same τ and CEE.)"""
    data = sine_problem[0]
    ep = cz.fit(cz.GPPL(kernel="se"), data, method="ep", learn_kernel=True)
    ng = cz.fit(cz.GPPL(kernel="se"), data, method="natgrad", learn_kernel=True, tol=1e-5, progress_bar=False)
    ell_ep = np.array(ep.settings["learned_lengthscale"])
    ell_ng = np.array(ng.settings["learned_lengthscale"])
    print(f"EP {ell_ep.round(3)}, natgrad {ell_ng.round(3)}, ratio {(ell_ng / ell_ep).round(3)}, start "
          f"{np.round(ng.settings['start_lengthscale'], 3)}; natgrad {ng.settings['iterations']} iterations")
    assert ng.settings["likelihood"] == "exact" and ng.settings["converged"]
    np.testing.assert_allclose(ell_ng, ell_ep, rtol=0.2)
    start = np.array(ng.settings["start_lengthscale"])
    assert np.abs(np.log(ell_ng / start)).max() > 0.5  # they moved far from the median heuristic


def test_natgrad_learned_lengthscales_recover_a_known_ard_truth():
    data, _ = _ard_problem()
    post = cz.fit(cz.GPPL(kernel="se"), data, method="natgrad", learn_kernel=True, progress_bar=False)
    ell = np.array(post.settings["learned_lengthscale"])
    print(f"median heuristic {np.round(post.settings['start_lengthscale'], 3)}, learned {ell.round(3)}")
    assert ell[1] > 3 * ell[0]
    np.testing.assert_allclose(post.model.lengthscale.numpy(), ell)
    assert torch.equal(post.setup.kernel.lengthscale, post.model.lengthscale)


def test_natgrad_lengthscale_prior_gives_the_map_estimate():
    """With lengthscale_prior, natgrad's θ steps climb bound + log p(ℓ): a tight prior at ℓ = 1 holds the
    irrelevant dimension's length-scale near 1 where the bound alone sends it far past it; a wide prior
    leaves the relevant one where the bound puts it."""
    import pyro.distributions as dist

    data, _ = _ard_problem(n_items=50, n_pairs=500)
    kw = dict(method="natgrad", learn_kernel=True, max_iter=150, progress_bar=False)
    free = np.array(cz.fit(cz.GPPL(kernel="se"), data, **kw).settings["learned_lengthscale"])
    tight = np.array(cz.fit(cz.GPPL(kernel="se", lengthscale_prior=dist.LogNormal(0.0, 0.05)), data,
                            **kw).settings["learned_lengthscale"])
    wide = np.array(cz.fit(cz.GPPL(kernel="se", lengthscale_prior=dist.LogNormal(0.0, 10.0)), data,
                           **kw).settings["learned_lengthscale"])
    print(f"no prior {free.round(3)}, LogNormal(0, 0.05) {tight.round(3)}, LogNormal(0, 10) {wide.round(3)}")
    assert free[1] > 3.0 and np.all(np.abs(np.log(tight)) < 0.2)
    assert abs(np.log(wide[0] / free[0])) < 0.15
    ep = {name: np.array(cz.fit(cz.GPPL(kernel="se", lengthscale_prior=prior), data, method="ep",
                                learn_kernel=True).settings["learned_lengthscale"])
          for name, prior in (("free", None), ("tight", dist.LogNormal(0.0, 0.05)))}
    print(f"ep: no prior {ep['free'].round(3)}, LogNormal(0, 0.05) {ep['tight'].round(3)}")
    assert ep["free"][1] > 3.0 and np.all(np.abs(np.log(ep["tight"])) < 0.2)
    for method in ("natgrad", "ep"):  # natgrad would learn (the MAP) unless told not to; ep learns when told
        with pytest.raises(DataError, match="lengthscale_prior"):
            cz.fit(cz.GPPL(kernel="se", lengthscale_prior=dist.LogNormal(0.0, 1.0)), data, method=method,
                   learn_kernel=False)


def test_natgrad_bound_rises_while_the_kernel_learns():
    """Full batch: the bound of Eq. 30 at successive evaluations never falls by more than 1e-3 of its
    size and ends well above where the median heuristic's own converged fit ends."""
    data, _ = _ard_problem(seed=1)
    post = cz.fit(cz.GPPL(kernel="se"), data, method="natgrad", learn_kernel=True, progress_bar=False)
    fixed = cz.fit(cz.GPPL(kernel="se"), data, method="natgrad", likelihood="exact", learn_kernel=False,
                   progress_bar=False)
    bounds = post.trace["bound"]
    drops = -np.diff(bounds) / np.abs(bounds[1:])
    print(f"{bounds.size} evaluations, largest relative drop {drops.max():.2e}; final bound "
          f"{bounds[-1]:.3f} against {fixed.trace['bound'][-1]:.3f} with ℓ fixed")
    assert drops.max() < 1e-3
    assert bounds[-1] > fixed.trace["bound"][-1] + 1.0


def test_natgrad_in_the_whitened_basis_is_the_same_fit():
    """With the kernel 'learned' at a zero learning rate, q lives in the whitened basis u = L⁻¹ f_m; the
    natural-gradient step is the same step there (a linear image), so the posterior equals the
    f-space fit's to round-off."""
    data, _ = _ard_problem(n_items=30, n_pairs=300)
    kw = dict(method="natgrad", likelihood="exact", rho_min=0.5, max_iter=40, tol=0.0, progress_bar=False)
    from crowdzoo.gp.kernels import median_heuristic

    model = cz.GPPL(kernel="se", lengthscale=median_heuristic(data.item_features))  # both start here
    whitened = cz.fit(model, data, learn_kernel=True, kernel_lr=0.0, **kw)
    plain = cz.fit(model, data, learn_kernel=False, **kw)
    assert whitened.settings["learned_lengthscale"] == whitened.settings["start_lengthscale"]
    torch.testing.assert_close(whitened.means, plain.means, rtol=1e-7, atol=1e-9)
    torch.testing.assert_close(whitened.covs, plain.covs, rtol=1e-7, atol=1e-9)
    assert abs(float(whitened.s[0] - plain.s[0])) < 1e-9


def test_natgrad_learns_inducing_inputs(sine_problem):
    """M = 10 inducing inputs on the sine problem: learning them with the length-scales ends at a
    higher bound and a lower held-out CEE than learning the length-scales alone."""
    data, f, (at, bt, yt) = sine_problem
    fits = {}
    for inducing in (False, True):
        post = cz.fit(cz.GPPL(kernel="se", n_inducing=10), data, method="natgrad", learn_kernel=True,
                      learn_inducing=inducing, progress_bar=False)
        p = post.predict_proba(at, bt)
        fits[inducing] = (post.trace["bound"][-1], -np.mean(yt * np.log(p) + (1 - yt) * np.log1p(-p)))
        print(f"learn_inducing={inducing}: bound {fits[inducing][0]:.2f}, held-out CEE "
              f"{fits[inducing][1]:.4f}, inducing inputs moved {post.settings.get('learned_inducing_moved')}")
    assert fits[True][0] > fits[False][0] + 1.0
    assert fits[True][1] < fits[False][1]


@pytest.mark.parametrize("method", ["ep", "natgrad"])
def test_learned_values_reach_arviz_and_the_report(tmp_path, method):
    data, _ = _ard_problem(n_items=30, n_pairs=300)
    post = cz.fit(cz.GPPL(kernel="se"), data, method=method, learn_kernel=True, progress_bar=False)
    ell = post.settings["learned_lengthscale"]
    dt = post.to_arviz(n_draws=50)
    np.testing.assert_allclose(dt.attrs["learned_lengthscale"], ell)
    np.testing.assert_allclose(dt.attrs["start_lengthscale"], post.settings["start_lengthscale"])
    rep = cz.report(post, tmp_path / "r.html")
    assert rep.settings["fit.learned_lengthscale"] == ell
    np.testing.assert_allclose(rep.settings["model.lengthscale"], ell)
    assert "learned_lengthscale" in (tmp_path / "r.html").read_text()


def test_natgrad_learning_resumes_bit_for_bit(tmp_path):
    """θ and Adam's moments are in the loop's state: a fit stopped at iteration 12 and resumed ends at
    the same posterior as an uninterrupted one."""
    data, _ = _ard_problem(n_items=30, n_pairs=300)
    kw = dict(method="natgrad", learn_kernel=True, max_iter=25, tol=0.0, progress_bar=False, batch_size=100)
    whole = cz.fit(cz.GPPL(kernel="se"), data, **kw)
    part = cz.fit(cz.GPPL(kernel="se"), data, **{**kw, "max_iter": 12})
    rest = cz.fit(cz.GPPL(kernel="se"), data, resume=part, **kw)
    assert rest.settings["learned_lengthscale"] == whole.settings["learned_lengthscale"]
    torch.testing.assert_close(rest.means, whole.means, rtol=0, atol=0)


def _irrelevant_feature_problem(seed=0, n_items=60, n_pairs=600, n_test=1000):
    """f = sin(1.5 x₀) + 0.5 cos(2 x₁) on three features uniform on (−2, 2), x₂ irrelevant; labels
    y ~ Bernoulli(Φ(2 (f_a − f_b))), the held-out pairs drawn from the same truth."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n_items, 3))
    f = np.sin(1.5 * X[:, 0]) + 0.5 * np.cos(2 * X[:, 1])

    def pairs(n):
        a = rng.integers(n_items, size=n)
        b = (a + 1 + rng.integers(n_items - 1, size=n)) % n_items
        return a, b, (rng.random(n) < norm.cdf(2 * (f[a] - f[b]))).astype(float)

    (a, b, y), (at, bt, yt) = pairs(n_pairs), pairs(n_test)
    return cz.PairwiseData.from_arrays(a, b, y, item_features=X), f, (at, bt, yt)


def test_the_default_learns_the_kernel_and_beats_the_median_heuristic():
    """GPPL's default route learns its length-scales: on a problem with an irrelevant feature the
    default fit's held-out log loss (labels drawn from the simulated truth) is below the median
    heuristic's (learn_kernel=False) by more than .01 and closer to the truth's own, and the irrelevant
    feature's length-scale ends far beyond the relevant ones (at this seed: learned .285, median
    heuristic .315, the truth .264; ℓ = 1.2, 1.4, 98)."""
    data, f, (at, bt, yt) = _irrelevant_feature_problem()

    def log_loss(p):
        return float(-np.mean(yt * np.log(p) + (1 - yt) * np.log1p(-p)))

    default = cz.fit(cz.GPPL(), data, progress_bar=False)
    fixed = cz.fit(cz.GPPL(), data, learn_kernel=False, progress_bar=False)
    assert default.method == "natgrad" and default.settings["learn_kernel"] is True
    assert fixed.settings["learn_kernel"] is False and "learned_lengthscale" not in fixed.settings
    assert (default.settings["tol"], fixed.settings["tol"]) == (3e-4, 1e-4)  # the stop rule's, unset
    assert fixed.model.lengthscale is None and torch.equal(fixed.setup.kernel.lengthscale,
                                                           cz.GPPL().setup(data).kernel.lengthscale)
    ell = np.array(default.settings["learned_lengthscale"])
    truth = log_loss(norm.cdf(2 * (f[at] - f[bt])))
    learned, heuristic = log_loss(default.predict_proba(at, bt)), log_loss(fixed.predict_proba(at, bt))
    print(f"held-out log loss: learned {learned:.4f}, median heuristic {heuristic:.4f}, truth {truth:.4f}; "
          f"ℓ {ell.round(2)} from {np.round(default.settings['start_lengthscale'], 2)}")
    assert learned < heuristic - 0.01
    assert learned - truth < 0.75 * (heuristic - truth)
    assert ell[2] > 5 * ell[:2].max()


def test_the_default_keeps_the_kernel_where_it_has_nothing_to_learn():
    """learn_kernel unset learns only where the model leaves ℓ to the median heuristic, on items with
    features, on full batches; a set length-scale, a kernel of one's own, items without features and
    mini-batches keep the kernel fixed (where learn_kernel=True is refused or honoured), and a
    lengthscale_prior is learned (its MAP) rather than ignored."""
    import pyro.distributions as dist

    data, _, _ = _irrelevant_feature_problem(n_items=20, n_pairs=120)
    bare, _ = cz.simulate_gppl(n_items=10, n_pairs=40, n_features=0, seed=1)
    kw = dict(max_iter=3, tol=0, progress_bar=False, check_confidence=False)
    learns = {
        "default": cz.fit(cz.GPPL(), data, **kw),
        "Kernel('se')": cz.fit(cz.GPPL(kernel=cz.gp.Kernel("se")), data, **kw),
        "lengthscale set": cz.fit(cz.GPPL(lengthscale=1.0), data, **kw),
        "own kernel": cz.fit(cz.GPPL(kernel=lambda x1, x2: torch.exp(-torch.cdist(x1, x2))), data, **kw),
        "no features": cz.fit(cz.GPPL(), bare, **kw),
        "mini-batches": cz.fit(cz.GPPL(), data, batch_size=60, **kw),
        "a batch of every label": cz.fit(cz.GPPL(), data, batch_size=120, **kw),
        "prior, mini-batches": cz.fit(cz.GPPL(lengthscale_prior=dist.LogNormal(0.0, 1.0)), data,
                                      batch_size=60, **kw),
    }
    got = {k: p.settings["learn_kernel"] for k, p in learns.items()}
    assert got == {"default": True, "Kernel('se')": True, "lengthscale set": False, "own kernel": False,
                   "no features": False, "mini-batches": False, "a batch of every label": True,
                   "prior, mini-batches": True}, got
    assert cz.fit(cz.GPPL(lengthscale=1.0), data, learn_kernel=True, **kw).settings["learn_kernel"]


def _many_features_problem(seed=0, n_items=150, n_features=32, n_twins=10, n_train=1500, n_test=1000):
    """f = sin 1.5x₀ + x₁ − 0.5x₂² over 32 standard-normal features (29 irrelevant), y ~ Bernoulli(Φ(2(f_a −
    f_b))); the last ``n_twins`` items copy the features (and utilities) of the first ones, as duplicated
    texts do, and some training labels compare an item with its twin."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_items, n_features))
    X[-n_twins:] = X[:n_twins]
    f = np.sin(1.5 * X[:, 0]) + X[:, 1] - 0.5 * X[:, 2] ** 2

    def pairs(n):
        a = rng.integers(n_items, size=n)
        b = (a + 1 + rng.integers(n_items - 1, size=n)) % n_items
        return a, b, (rng.random(n) < norm.cdf(2 * (f[a] - f[b]))).astype(float)

    a, b, y = pairs(n_train)
    twins = np.arange(n_twins)
    a, b = np.concatenate([a, twins]), np.concatenate([b, n_items - n_twins + twins])
    y = np.concatenate([y, (rng.random(n_twins) < 0.5).astype(float)])
    return cz.PairwiseData.from_arrays(a, b, y, item_features=X), pairs(n_test)


def test_natgrad_learns_in_many_feature_dimensions():
    """GPPL's defaults on 32 features of which 3 matter, with some items sharing their features: the
    length-scales start where the median pair of items is at distance 1 (computed here over every pair),
    they move off that start, the three relevant ones end shorter than every irrelevant one, and the
    held-out log loss beats the fixed median heuristic's by .03 or more."""
    data, (at, bt, yt) = _many_features_problem()
    learned = cz.fit(cz.GPPL(), data, method="natgrad", progress_bar=False)
    fixed = cz.fit(cz.GPPL(), data, method="natgrad", learn_kernel=False, progress_bar=False)
    X = np.asarray(data.item_features)
    start = np.array(learned.settings["start_lengthscale"])
    i, j = np.triu_indices(X.shape[0], 1)
    r = np.sqrt((((X[i] - X[j]) / start) ** 2).sum(-1))
    ell = np.array(learned.settings["learned_lengthscale"])
    cee = {}
    for name, post in (("learned", learned), ("fixed", fixed)):
        p = post.predict_proba(at, bt)
        cee[name] = -np.mean(yt * np.log(p) + (1 - yt) * np.log1p(-p))
    print(f"median r at the start {np.median(r):.3f}; learned relevant {ell[:3].round(2)}, irrelevant min "
          f"{ell[3:].min():.2f}; held-out log loss learned {cee['learned']:.3f}, fixed {cee['fixed']:.3f}")
    assert abs(np.median(r) - 1.0) < 0.05
    assert np.abs(np.log(ell / start)).max() > 1.0
    assert ell[:3].max() < ell[3:].min()
    assert cee["learned"] < cee["fixed"] - 0.03
