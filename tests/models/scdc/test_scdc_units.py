"""Features in raw units: with a Gaussian likelihood the networks read each feature standardised
(``standardise``: by default where some feature is far from unit scale) and the decoder's Gaussian is
mapped back to the data's units. Checked against an analytic identity (the mapped density is the
standardised one times the Jacobian) and on a user-like set — three groups, one feature a price in
euros — where the features as given put every item in one cluster."""
import warnings

import numpy as np
import pytest
import torch

import crowdzoo as cz
from crowdzoo.cluster_metrics import hungarian_accuracy
from crowdzoo.models.scdc.model import far_from_unit_scale, observation_dist, observation_setup

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def user_set(seed=7, n=300):
    """Three groups in (width, hue, price): the price in euros (sd about 200 about 5,000); 700 yes/no
    links from four raters of accuracy 0.95, 0.9, 0.8 and 0.65; string ids as a user has them."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 3, n)
    X = np.array([[0, 0, 0], [3, 0, 1], [0, 3, -1]], float)[z] + rng.normal(size=(n, 3)) * [1.0, 0.8, 2.0]
    X[:, 2] = 100 * X[:, 2] + 5000
    a, b = np.array([rng.choice(n, 2, replace=False) for _ in range(700)]).T
    rater = rng.integers(0, 4, 700)
    same = (z[a] == z[b]) ^ (rng.random(700) > np.array([0.95, 0.9, 0.8, 0.65])[rater])
    ids = np.array([f"photo_{k:04d}.jpg" for k in range(n)])
    data = cz.LinkData.from_arrays(ids[a], ids[b], same.astype(float), X,
                                   workers=np.array(["ann", "bob", "cy", "dee"])[rater], item_ids=ids)
    return data, z, X


def test_the_rule_flags_raw_units_and_leaves_unit_scale_alone():
    rng = np.random.default_rng(0)
    unit = rng.normal(size=(200, 3))
    assert not far_from_unit_scale(unit) and not far_from_unit_scale(7 * unit)  # the pinwheel's sd 7
    assert far_from_unit_scale(unit + [0, 0, 2020]) and far_from_unit_scale(unit * [1, 1, 200])
    assert far_from_unit_scale(unit * [1, 1, 0.01]) and not far_from_unit_scale(np.c_[unit, np.ones(200)])
    setup = observation_setup("gaussian", unit * [1, 1, 200] + 5000, noise=0.3)
    np.testing.assert_allclose(setup.loc, (unit * [1, 1, 200] + 5000).mean(0))
    assert setup.log_noise == pytest.approx([np.log(0.3)] * 3)  # the cap in standardised units
    assert observation_setup("gaussian", unit, noise=0.3).loc is None
    assert observation_setup("bernoulli", rng.random((5, 2)), standardise=True).loc is None


def test_the_mapped_density_is_the_standardised_one_times_the_jacobian():
    g = torch.Generator().manual_seed(0)
    out, o = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    log_scale = torch.randn(3, generator=g)
    loc, scale = torch.tensor([5000.0, -2.0, 0.5]), torch.tensor([200.0, 0.3, 1.0])
    raw = observation_dist(out, log_scale, "gaussian", loc, scale).log_prob(loc + scale * o)
    std = observation_dist(out, log_scale, "gaussian").log_prob(o)
    torch.testing.assert_close(raw, std - torch.log(scale).sum(), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("cls", [cz.SCDC, cz.BayesSCDC])
def test_defaults_cluster_a_set_in_raw_units(cls):
    """The defaults standardise this set and cluster it, with the links, at least as well as a
    full-covariance Gaussian mixture on the standardised features alone (and ≥ 0.9); ``predict`` of the
    raw features of new items reads them the same way. With the features as given the fit ends in one
    cluster (the networks cannot reach a mean of 5,000)."""
    from sklearn.mixture import GaussianMixture

    data, z, X = user_set()
    gmm = hungarian_accuracy(z, GaussianMixture(3, n_init=5, random_state=0).fit_predict(
        (X - X.mean(0)) / X.std(0)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = cz.fit(cls(n_clusters=3), data, n_init=1, progress_bar=False)
        acc = hungarian_accuracy(z, post.predict().to_numpy())
        new = hungarian_accuracy(z, np.asarray(post.predict(X)))
        raw = cz.fit(cls(n_clusters=3, standardise=False), data, n_init=1, progress_bar=False)
    print(f"{cls.__name__}: standardised {acc:.3f} (new items {new:.3f}; Gaussian mixture {gmm:.3f}), "
          f"as given: {len(raw.clusters_in_use())} cluster(s) in use")
    assert post.setup.loc is not None and acc >= max(0.9, gmm - 0.02) and new >= 0.85
    assert len(raw.clusters_in_use()) == 1
