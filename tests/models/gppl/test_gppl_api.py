"""GPPL API: swapping guides and priors, mini-batched Pyro SVI, clear errors."""
import numpy as np
import pyro.distributions as dist
import pytest
import torch
from pyro.infer.autoguide import AutoLowRankMultivariateNormal, AutoNormal

import crowdzoo as cz


@pytest.fixture(scope="module")
def small():
    data, f = cz.simulate_gppl(n_items=15, n_pairs=150, seed=5)
    return data, f


def test_svi_minibatch_and_swapped_guides_agree(small):
    data, _ = small
    m = cz.GPPL()
    ref = cz.fit(m, data, method="ep")
    a, b = data.item_ids[data.a[:40]], data.item_ids[data.b[:40]]
    p_ref = ref.predict_proba(a, b)
    for guide, kw in [(AutoNormal, {}),
                      (lambda model: AutoLowRankMultivariateNormal(model, rank=3, init_scale=0.05), {}),
                      (None, {"subsample_size": 50})]:
        post = cz.fit(m, data, method="svi", guide=guide, seed=1, num_steps=800, lr=0.03,
                      n_draws=400, **kw)
        assert np.abs(post.predict_proba(a, b) - p_ref).mean() < 0.05, (guide, kw)


def test_custom_guide_function(small):
    data, _ = small
    import pyro
    from pyro.distributions import constraints

    def my_guide(setup, a, b, y, subsample_size=None):
        loc = pyro.param("u_loc", torch.zeros(setup.M, dtype=torch.float64))
        sd = pyro.param("u_sd", 0.1 * torch.ones(setup.M, dtype=torch.float64),
                        constraint=constraints.positive)
        s_loc = pyro.param("s_loc", torch.tensor(0.0, dtype=torch.float64))
        pyro.sample("s", dist.LogNormal(s_loc, 0.1))
        pyro.sample("u", dist.Normal(loc, sd).to_event(1))

    post = cz.fit(cz.GPPL(), data, method="svi", guide=my_guide, num_steps=1000, lr=0.03, n_draws=300)
    assert post.settings["guide"].endswith(".test_custom_guide_function.<locals>.my_guide")
    ref = cz.fit(cz.GPPL(), data, method="ep")
    a, b = data.item_ids[data.a], data.item_ids[data.b]
    assert np.abs(post.predict_proba(a, b) - ref.predict_proba(a, b)).mean() < 0.05


def test_swapped_prior_round_trips(small, tmp_path):
    data, _ = small
    model = cz.GPPL(s_prior=dist.LogNormal(torch.tensor(0.0, dtype=torch.float64),
                                           torch.tensor(1.0, dtype=torch.float64)))
    post = cz.fit(model, data, method="ep")
    post.save(tmp_path / "p.pt")
    back = cz.load(tmp_path / "p.pt")
    assert type(back.model.s_prior).__name__ == "LogNormal"
    a, b = data.item_ids[data.a], data.item_ids[data.b]
    np.testing.assert_array_equal(back.predict_proba(a, b), post.predict_proba(a, b))
    with pytest.raises(cz.DataError, match="Gamma"):
        cz.fit(model, data, method="natgrad")


def test_prior_changes_the_posterior_scale(small):
    """A prior that pins s large (small functions) shrinks utilities towards 0."""
    data, _ = small
    loose = cz.fit(cz.GPPL(), data, method="ep")
    tight = cz.fit(cz.GPPL(shape_s0=500.0, rate_s0=10.0), data, method="ep")
    assert tight.utilities()[0].abs().mean() < 0.5 * loose.utilities()[0].abs().mean()


def test_clear_errors(small):
    data, _ = small
    with pytest.raises(cz.DataError, match="method"):
        cz.fit(cz.GPPL(), data, method="laplace")
    with pytest.raises(cz.DataError, match="data"):
        cz.fit(cz.GPPL(), {"a": [0]}, method="ep")
    post = cz.fit(cz.GPPL(), data, method="natgrad")
    with pytest.raises(cz.DataError, match=r"a: row 1: item id 99"):
        post.predict_proba([0, 99], [1, 2])
    with pytest.raises(cz.DataError, match="item_features"):
        post.predict_proba([0], [1], item_features=np.ones((3, 5)))
    with pytest.raises(cz.DataError, match="lengthscale"):
        cz.fit(cz.GPPL(lengthscale=[0.0, 1.0]), data, method="ep")


def test_indefinite_kernel_gives_advice():
    # duplicated feature rows with tiny jitter and an exact model: still solvable thanks to the
    # escalating jitter; an all-NaN kernel is reported with advice rather than a torch trace
    from crowdzoo.gp.linalg import cholesky

    K = torch.full((3, 3), float("nan"), dtype=torch.float64)
    with pytest.raises(cz.NumericalError, match="Try|check"):
        cholesky(K)


def test_nan_elbo_stops_with_advice(small):
    data, _ = small
    with pytest.raises(cz.NumericalError, match="Try"):
        cz.fit(cz.GPPL(), data, method="svi", lr=1e6, num_steps=100)
