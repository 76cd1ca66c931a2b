"""BayesSCDC's links-aware start (``natgrad.hmrf_em``): after the Gaussian mixture on the latent points,
rounds of EM whose E-step includes the annotations' messages move the mixture onto the groups the links
reveal, where the features' mixture cuts across them; without annotations the mixture stays as it
was."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.mixture import GaussianMixture

import crowdzoo as cz
from crowdzoo.cluster_metrics import hungarian_accuracy
from crowdzoo.data.simulate_links import two_coin_workers
from crowdzoo.models.scdc.bayes import F64, expected, local_step, relational_weights
from crowdzoo.models.scdc.natgrad import START_ROUNDS, encode_all, hmrf_em, init_conjugate, mixture_globals
from crowdzoo.models.scdc.svi import link_tensors


class _Identity(torch.nn.Module):
    """Recognition potentials of an identity observation, x_n ≈ o_n with precision ``lam``."""

    def __init__(self, lam: float):
        super().__init__()
        self.lam = lam

    def potentials(self, o):
        o = o.to(F64)
        return self.lam * o, torch.full_like(o, self.lam)


def _stripes(seed: int, n: int = 300):
    """Two parallel stripes in 2-D (long sd 3 along the first axis, 1.2 apart and sd 0.4 across), 10
    reliable workers (α = β = 0.9) × 60 links: the features' two-component mixture, started from
    k-means as scikit-learn's is, splits the plane left and right, across both stripes."""
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=n)
    O = np.c_[3.0 * rng.standard_normal(n), 1.2 * (y - 0.5) + 0.4 * rng.standard_normal(n)]
    df = two_coin_workers(y, 10, 0.9, 0.9, window=61, seed=rng)
    data = cz.LinkData.from_arrays(df["i"].to_numpy(), df["j"].to_numpy(), df["same"].to_numpy(), O,
                                   workers=df["worker"].to_numpy())
    return data, y


def _accuracies(q, nets, t, y):
    """(the mixture's own clusters, every item's local optimum with its annotations' messages): each
    one's accuracy against the groups."""
    h, lam = nets.potentials(t.O)
    alone = local_step(expected(q), h, lam).phi.argmax(-1).numpy()
    linked = encode_all(nets, q, t, 4, "cpu").phi.argmax(-1).numpy()
    return hungarian_accuracy(y, alone), hungarian_accuracy(y, linked)


def _start(data, seed: int, annotated: bool = True):
    """(the features' start, the links-aware start, the start's q): the conjugate posteriors given a
    Gaussian mixture fitted to the latent points (here the features themselves, as pretraining's
    :func:`pretrain_natgrad` fits them) and given :func:`hmrf_em`'s responsibilities from it."""
    t = link_tensors(data)
    model = cz.BayesSCDC(n_clusters=2, latent_dim=2)
    nets, prior = _Identity(100.0), model.prior(data.n_workers, "cpu")
    q = init_conjugate(model, data.n_workers, torch.Generator().manual_seed(seed), "cpu")
    gmm = GaussianMixture(2, covariance_type="full", n_init=3, reg_covar=1e-4, random_state=seed)
    phi = torch.as_tensor(gmm.fit(data.O).predict_proba(data.O), dtype=F64)
    fitted = (torch.as_tensor(v, dtype=F64) for v in (np.log(gmm.weights_), gmm.means_, gmm.covariances_))
    weight, _, _ = relational_weights(expected(q), t.w, t.L.to(F64))
    keep = slice(None) if annotated else slice(0, 0)
    refined = hmrf_em(t.O.to(F64), *fitted, phi, t.i[keep], t.j[keep], weight[keep], START_ROUNDS,
                      model.sweeps, 1e-4)
    h, lam = nets.potentials(t.O)
    start = [mixture_globals(p, h / lam, lam, prior, q, "cpu") for p in (phi, refined)]
    return start[0], start[1], q, phi, refined


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_links_move_the_start_off_a_mixture_that_cuts_across_the_groups(seed):
    """The start that pretraining gives (a Gaussian mixture on the latent points, here the features
    themselves) cuts across the stripes: its clusters score ≤ 0.7, and the whole graph's messages
    against it leave the items at ≤ 0.86. After the links-aware EM the mixture's own clusters, with no
    messages, score ≥ 0.9 and the items with their messages ≥ 0.95."""
    data, y = _stripes(seed)
    features, links, q, _, _ = _start(data, seed)
    nets, t = _Identity(100.0), link_tensors(data)
    before, after = _accuracies(features, nets, t, y), _accuracies(links, nets, t, y)
    print(f"seed {seed}: features' start {before}, links-aware start {after}")
    assert before[0] <= 0.7 and before[1] <= 0.86
    assert after[0] >= 0.9 and after[1] >= 0.95
    assert torch.equal(links.alpha, q.alpha) and torch.equal(links.beta, q.beta)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_links_not_more_rounds_of_em_move_the_start(seed):
    """The same rounds of EM without the annotations leave the mixture across the stripes (its clusters
    ≤ 0.75, seeds 0–2: 0.56, 0.73, 0.57, against ≥ 0.9 with them): what moves it is the links."""
    data, y = _stripes(seed)
    _, alone, _, _, _ = _start(data, seed, annotated=False)
    acc = _accuracies(alone, _Identity(100.0), link_tensors(data), y)[0]
    print(f"seed {seed}: EM without the annotations {acc:.3f}")
    assert acc <= 0.75


def test_the_links_aware_start_is_the_default_and_the_features_start_one_argument_away():
    """``start="links"`` is fit_natgrad's default; ``start="features"`` keeps pretraining's mixture as
    it is; another value is refused."""
    import inspect

    from crowdzoo.errors import DataError
    from crowdzoo.models.scdc.natgrad import fit_natgrad

    assert inspect.signature(fit_natgrad).parameters["start"].default == "links"
    data, _ = _stripes(0, n=100)
    with pytest.raises(DataError, match="start"):
        cz.fit(cz.BayesSCDC(n_clusters=2), data, start="gmm", n_init=1, progress_bar=False)


@pytest.mark.parametrize("seed", [0, 2])
def test_the_default_fit_follows_the_links_where_the_features_are_ambiguous(seed):
    """scdc-crowd's overlapping set, small (120 items in three 4-D groups whose means lie 2 sd apart,
    20 two-coin workers × 40 links), defaults but one initialisation: from the features' start the
    fit's clusters (the variational fixed point) put 0.84 and 0.86 of the items in their groups on
    seeds 0 and 2, from the links-aware start 0.94 on both."""
    import warnings

    from crowdzoo.comparisons.scdc_crowd import link_set

    data, K, _, _ = link_set("overlapping", seed, quick=True)
    acc = {}
    for start in ("links", "features"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = cz.fit(cz.BayesSCDC(n_clusters=K), data, seed=seed, n_init=1, start=start,
                          progress_bar=False)
        acc[start] = hungarian_accuracy(data.labels, post.predict().to_numpy())
        assert post.settings["start"] == start
    print(f"seed {seed}: {acc}")
    assert acc["links"] >= 0.9 and acc["features"] <= 0.88
