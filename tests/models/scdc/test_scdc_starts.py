"""SCDC and BayesSCDC take the best of ``n_init`` initialisations by their final bound, record every
initialisation's bound, are deterministic given the seed, and warn (CollapseWarning) when the mixture
collapsed: fewer than K clusters in use, or a bound that fell from its best."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import crowdzoo as cz
from crowdzoo.errors import CollapseWarning
from crowdzoo.models.scdc.starts import check_collapse, init_seeds

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def blobs():
    """Three separated 2-D blobs of 30 items and 3 MCVC workers × 200 pairs (α = β = 0.9)."""
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1, 2], 30)
    X = rng.normal(size=(90, 2)) * 0.3 + np.array([[0, 0], [4, 0], [0, 4]])[labels]
    df = cz.data.mcvc_workers(labels, 3, np.full(3, 0.9), np.full(3, 0.9), n_pairs=200, seed=0)
    return cz.LinkData.from_frame(df, X, labels=labels)


def _fit(model, data, **kw):
    """The fit and the categories of the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = cz.fit(model, data, progress_bar=False, **kw)
    return post, {w.category for w in caught}


def test_collapse_is_read_from_the_responsibilities_and_the_bound():
    """Two of four clusters holding the items' mass warns, naming the count and what to try; a bound
    that ends 10 % below its best warns; four clusters in use and a rising bound do not."""
    g = torch.Generator().manual_seed(0)
    spread = torch.softmax(torch.randn(100, 4, generator=g, dtype=torch.float64), -1)
    merged = spread.clone()
    merged[:, 2:] = 1e-4
    with pytest.warns(CollapseWarning, match=r"only 2 of its K = 4 clusters.*n_init"):
        got = check_collapse(merged, [-3.0, -2.0], "test", "another seed, or n_init")
    assert got["clusters_used"] == 2 and 1.9 < got["clusters_effective"] < 2.1
    with pytest.warns(CollapseWarning, match="degenerated"):
        check_collapse(spread, [-3.0, -2.0, -2.2], "test", "n_init")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_collapse(spread, [-3.0, -2.0, -1.99], "test", "n_init")["clusters_used"] == 4


def test_the_fall_of_the_bound_is_read_over_a_tenth_of_the_epochs():
    """A rising bound whose last epoch dips 13 % below the epoch before (mini-batch noise) does not
    warn; the same trace that then stays 13 % down for its last tenth does."""
    rising = list(np.linspace(-60.0, -10.0, 58)) + [-11.3, -10.2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_collapse(torch.full((10, 2), 0.5), rising[:-1] + [-11.3], "test", "n_init")
    with pytest.warns(CollapseWarning, match="degenerated"):
        check_collapse(torch.full((10, 2), 0.5), rising + [-12.0] * 10, "test", "n_init")


def test_a_collapsed_bayesscdc_fit_warns(blobs):
    """BayesSCDC without its warm-up and k-means restart (warmup=0, init="random"): the mixture falls
    onto the untrained recognition network's output and keeps fewer than its 3 clusters — it warns."""
    model = cz.BayesSCDC(n_clusters=3, latent_dim=2, hidden=(16,))
    post, cats = _fit(model, blobs, n_epochs=20, batch_size=30, warmup=0, init="random", n_init=1,
                      pretrain=0, seed=1)
    print(f"collapsed: {post.settings['clusters_used']} clusters in use, "
          f"effective {post.settings['clusters_effective']:.2f}")
    assert post.settings["clusters_used"] < 3 and CollapseWarning in cats


@pytest.mark.parametrize("name", ["scdc", "bayesscdc"])
def test_a_well_separated_fit_does_not_warn(blobs, name):
    """K = 3 on the three blobs, three initialisations (BayesSCDC after 20 epochs of pretraining): every
    cluster in use, no warning of collapse."""
    if name == "scdc":
        post, cats = _fit(cz.SCDC(n_clusters=3, latent_dim=2, hidden=(16,)), blobs, n_epochs=40,
                          batch_size=30, pretrain=0, seed=0)
    else:
        post, cats = _fit(cz.BayesSCDC(n_clusters=3, latent_dim=2, hidden=(16,)), blobs, n_epochs=60,
                          batch_size=30, pretrain=20, seed=0)
    st = post.settings
    print(f"{name}, K = 3: {st['clusters_used']} clusters in use, bounds {np.round(st['init_bounds'], 4)}")
    assert st["clusters_used"] == 3 and CollapseWarning not in cats


@pytest.mark.parametrize("name", ["scdc", "bayesscdc"])
def test_n_init_keeps_the_best_bound_and_is_deterministic(blobs, name):
    """n_init=3 records three bounds, keeps the highest (its trace ends there), and is the single fit of
    the kept seed; the same seed gives the same fit, bit for bit."""
    model = (cz.SCDC if name == "scdc" else cz.BayesSCDC)(n_clusters=3, latent_dim=2, hidden=(8,))
    kw = dict(n_epochs=8, batch_size=30, pretrain=0, seed=5)
    post, _ = _fit(model, blobs, n_init=3, **kw)
    st = post.settings
    bounds = st["init_bounds"]
    print(f"{name}: bounds {np.round(bounds, 4)}, kept {st['init_kept']}")
    assert len(bounds) == 3 and st["n_init"] == 3 and st["init_seeds"] == init_seeds(5, 3)
    assert len(set(st["init_seeds"])) == 3 and st["init_seeds"][0] == 5
    assert st["init_kept"] == int(np.argmax(bounds)) and post.trace["elbo"][-1] == max(bounds)
    assert st["init_seed"] == st["init_seeds"][st["init_kept"]]
    alone, _ = _fit(model, blobs, n_init=1, **{**kw, "seed": st["init_seed"]})
    assert torch.equal(alone.cluster_probs, post.cluster_probs)
    again, _ = _fit(model, blobs, n_init=3, **kw)
    assert again.settings["init_bounds"] == bounds and torch.equal(again.cluster_probs, post.cluster_probs)
