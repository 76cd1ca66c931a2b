"""SCDC: the closed-form ELBO against Pyro's Trace_ELBO on the same model
and guide; the two-coin relational term's maximiser against the closed-form counts; workers'
reliabilities and the pinwheel's clusters recovered from simulated data; posterior API, bad input."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from pyro.infer import Trace_ELBO

import crowdzoo as cz
from crowdzoo.cluster_metrics import hungarian_accuracy
from crowdzoo.data.links import same_cluster_counts
from crowdzoo.models.scdc.model import Globals, init_globals, scdc_guide, scdc_model, two_coin_loglik
from crowdzoo.models.scdc.model import elbo as exact_elbo
from crowdzoo.models.scdc.svi import batches, link_tensors


def test_closed_form_elbo_equals_pyros_trace_elbo_on_the_same_model_and_guide():
    """The route's ELBO (sum over z exact, relational term in closed form) and Trace_ELBO on
    scdc_model/scdc_guide (z sampled) estimate the same number: their means over many draws agree
    within 4 standard errors."""
    data, _ = cz.simulate_links(n_arms=3, n_per_arm=8, n_annotated=12, n_workers=2, window=8, seed=1)
    model = cz.SCDC(n_clusters=3, latent_dim=2, hidden=(6,))
    setup = model.setup(data)
    nets = model.networks(setup, seed=0)
    gen = torch.Generator().manual_seed(0)
    g = init_globals(3, 2, data.n_workers, 0.8, gen)
    g = Globals(g.pi_logits + torch.tensor([0.3, -0.2, 0.0]), g.mu, g.log_sigma - 0.3,
                torch.tensor([1.0, 2.0]), torch.tensor([0.5, 1.5]))
    batch = next(batches(link_tensors(data), 10, 6, torch.Generator().manual_seed(1), "cpu"))
    strong = Globals(*g[:3], torch.tensor([4.0, 3.0]), torch.tensor([3.5, 4.5]))  # α, β near 1
    # the whole ELBO, and the annotation term alone (item terms scaled away, reliable workers)
    for name, b, gg in (("whole", batch, g), ("annotations", batch._replace(item_scale=1e-9), strong)):
        with torch.no_grad():
            exact = torch.stack([exact_elbo(b, nets, gg, gen)[0] for _ in range(400)]).double()
            trace = Trace_ELBO()
            mc = torch.tensor([-trace.loss(scdc_model, scdc_guide, b, nets, gg) for _ in range(1200)])
        se = math.sqrt(exact.var() / exact.numel() + mc.var() / mc.numel())
        print(f"ELBO ({name}): closed form {exact.mean():.3f}, Trace_ELBO {mc.mean():.3f}, se {se:.3f}")
        assert abs(float(exact.mean() - mc.mean())) < 4 * se
        assert exact.std() < mc.std()  # the exact sum over z removes the score-function noise


def test_two_coin_maximiser_is_the_closed_form_count():
    """With the clusters known (s ∈ {0, 1}), maximising the relational term of Eq. 1–2 over α_m, β_m
    gives α̂_m = must-links among same-cluster pairs / same-cluster pairs, β̂_m likewise."""
    data, truth = cz.simulate_links(n_arms=3, n_per_arm=30, n_annotated=60, n_workers=4, window=30,
                                    alpha=[0.95, 0.9, 0.8, 0.7], beta=[0.9, 0.6, 0.85, 0.75], seed=2)
    z = truth["labels"]
    s = torch.as_tensor(z[data.i] == z[data.j], dtype=torch.float64)
    L = torch.as_tensor(data.same, dtype=torch.float64)
    w = torch.as_tensor(data.worker)
    a = torch.zeros(4, dtype=torch.float64, requires_grad=True)  # float64: the maximiser to 1e-4
    b = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([a, b], max_iter=200, tolerance_grad=1e-9, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        same, diff = two_coin_loglik(L, a[w], b[w])
        loss = -(s * same + (1 - s) * diff).sum()
        loss.backward()
        return loss

    opt.step(closure)
    counts = same_cluster_counts(data, z)
    assert np.allclose(torch.sigmoid(a).detach().numpy(), counts["alpha_hat"], atol=1e-4)
    assert np.allclose(torch.sigmoid(b).detach().numpy(), counts["beta_hat"], atol=1e-4)


@pytest.fixture(scope="module")
def blobs(blob_links):
    """The blobs of conftest's ``blob_links``, fitted by SCDC: (data, posterior, α, β)."""
    data, alpha, beta = blob_links
    post = cz.fit(cz.SCDC(n_clusters=6, latent_dim=2, hidden=(32, 32)), data, n_epochs=150, batch_size=50,
                  pretrain=0, progress_bar=False, seed=0, n_init=1)
    return data, post, alpha, beta


def test_workers_reliabilities_recovered_with_clusters_unknown(blobs):
    data, post, alpha, beta = blobs
    acc = hungarian_accuracy(data.labels, post.predict().to_numpy())
    wk = post.workers()
    print(f"accuracy {acc:.3f}; |α̂ − α| max {np.abs(wk['alpha'] - alpha).max():.3f}, "
          f"|β̂ − β| max {np.abs(wk['beta'] - beta).max():.3f}")
    assert acc > 0.97
    assert np.abs(wk["alpha"].to_numpy() - alpha).max() < 0.05
    assert np.abs(wk["beta"].to_numpy() - beta).max() < 0.05
    # the weight of Fig. 3c orders the workers as the truth does
    true_w = np.log(alpha / (1 - alpha)) + np.log(beta / (1 - beta))
    assert np.corrcoef(wk["weight"], true_w)[0, 1] > 0.9


def test_pretraining_alone_finds_the_blobs(blob_links):
    """VaDE-style pretraining (``pretrain=``: autoencoder, a Gaussian mixture on its codes, the
    classifier fitted to the mixture's responsibilities) clusters three separated blobs without
    annotations after a single joint epoch; a negative ``pretrain`` is refused."""
    data = blob_links[0].without_annotations()
    model = cz.SCDC(n_clusters=3, latent_dim=2, hidden=(16,))
    post = cz.fit(model, data, pretrain=30, n_epochs=1, batch_size=50, progress_bar=False, seed=0, n_init=1)
    acc = hungarian_accuracy(data.labels, post.predict().to_numpy())
    print(f"blobs after pretraining and one epoch: accuracy {acc:.3f}")
    assert acc > 0.97 and post.settings["pretrain"] == 30
    with pytest.raises(cz.DataError, match="pretrain"):
        cz.fit(model, data, pretrain=-1, progress_bar=False)


def test_pinwheel_with_annotations_is_clustered():
    """The paper's pinwheel (500 points, 100 annotated, 20 workers × 49 pairs, α = β = 0.9), small
    networks: Hungarian accuracy ≥ 0.9 (the paper: BayesSCDC 96.6 %)."""
    data, truth = cz.simulate_links(seed=0)
    post = cz.fit(cz.SCDC(n_clusters=15, latent_dim=2, hidden=(64, 64)), data, n_epochs=300,
                  pretrain=0, progress_bar=False, seed=0, n_init=1)
    acc = hungarian_accuracy(truth["labels"], post.predict().to_numpy())
    print(f"pinwheel accuracy {acc:.3f}, clusters in use {len(post.clusters_in_use())}")
    assert acc >= 0.9


def test_another_guide_trains_through_the_pyro_program(blobs):
    """guide=: a Pyro guide of z and x with a constrained parameter of its own (a positive
    temperature on q(z | o)) is trained by Trace_ELBO on scdc_model: its parameter moves and the
    clusters it gives beat chance."""
    import pyro
    import pyro.distributions as dist
    from pyro import poutine
    from torch.distributions import constraints

    data, _, _, _ = blobs

    def tempered_guide(batch, nets, g):
        pyro.module("scdc", nets)
        temp = pyro.param("temp", torch.tensor(2.0), constraint=constraints.positive)
        B = batch.O.shape[0]
        with pyro.plate("items", B), poutine.scale(scale=batch.item_scale), \
                poutine.mask(mask=torch.arange(B) < batch.n_uniform):
            z = pyro.sample("z", dist.Categorical(logits=nets.z_logits(batch.O) / temp))
            m, s = nets.x_params(batch.O, torch.nn.functional.one_hot(z, nets.K).float())
            pyro.sample("x", dist.Normal(m, s).to_event(1))

    post = cz.fit(cz.SCDC(n_clusters=3, latent_dim=2, hidden=(16,)), data, guide=tempered_guide,
                  n_epochs=40, batch_size=50, progress_bar=False, seed=0, n_init=1)
    assert abs(float(pyro.param("temp")) - 2.0) > 1e-3
    assert post.settings["guide"].endswith(".tempered_guide")  # module.function, as svi names a guide
    assert hungarian_accuracy(data.labels, post.predict().to_numpy()) > 0.5


def test_posterior_api_save_load_and_arviz(blobs, tmp_path):
    data, post, _, _ = blobs
    P = post.cluster_proba()
    assert P.shape == (150, 6) and np.allclose(P.sum(1), 1.0)
    ids = data.item_ids
    p_same = post.same_cluster_proba(ids[:5], ids[5:10])
    assert np.allclose(p_same, (P.to_numpy()[:5] * P.to_numpy()[5:10]).sum(1))
    assert post.same_cluster_proba(ids[3], ids[3])[0] == 1.0
    new = post.predict(data.O[:20])  # new observations: the encoder alone
    assert (new.to_numpy() == post.predict().to_numpy()[:20]).mean() > 0.9
    post.save(tmp_path / "scdc.pt")
    back = cz.load(tmp_path / "scdc.pt")
    assert np.array_equal(back.predict(data.O[:20]).to_numpy(), new.to_numpy())
    assert back.workers().equals(post.workers())
    dt = post.to_arviz(n_draws=50)
    assert dt.posterior["alpha"].shape == (1, 50, 5)
    assert dt.log_likelihood["y"].shape == (1, 50, data.n_annotations)
    assert "elbo" in dt["optimisation"]


def test_bad_input_is_refused_naming_the_argument(blobs):
    data, post, _, _ = blobs
    with pytest.raises(cz.DataError, match="LinkData"):
        cz.fit(cz.SCDC(), cz.simulate_gppl()[0])
    with pytest.raises(cz.DataError, match="likelihood"):
        cz.fit(cz.SCDC(likelihood="bernoulli"), data)  # observations outside [0, 1]
    with pytest.raises(cz.DataError, match="n_clusters"):
        cz.SCDC(n_clusters=0)
    with pytest.raises(cz.DataError, match="n_epochs"):
        cz.fit(cz.SCDC(), data, n_epochs=0)
    with pytest.raises(cz.DataError, match="O: row 1, column 0"):
        post.cluster_proba(np.array([[0.0, 1.0], [np.nan, 0.0]]))
    with pytest.raises(cz.DataError, match="O: expected shape"):
        post.cluster_proba(np.zeros((3, 5)))
