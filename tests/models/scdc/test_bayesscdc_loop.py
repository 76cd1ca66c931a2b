"""BayesSCDC on the shared natural-gradient loop (crowdzoo.inference.natgrad): a fit stopped by Ctrl-C, or
by a crash after a periodic checkpoint, resumes to the very posterior of an uninterrupted fit — the
globals, the networks' weights, Adam's state, the generator's state and this epoch's order of the items
— within an initialisation and across initialisations (n_init); a posterior resumes to more epochs; the
route's signature carries the loop's settings (the zoo and the CLI read it)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import crowdzoo as cz
from crowdzoo import zoo
from crowdzoo.cli import flags

pytestmark = pytest.mark.usefixtures("one_thread")

MODEL = dict(n_clusters=4, latent_dim=2, hidden=(8,))
#: 80 items in batches of 30: 3 steps an epoch (the last of 20 items), 5 epochs, 2 of warm-up
FIT = dict(n_epochs=5, warmup=2, pretrain=0, batch_size=30, progress_bar=False, seed=0)
STEPS = 15


@pytest.fixture(scope="module")
def data():
    data, _ = cz.simulate_links(n_arms=2, n_per_arm=40, n_annotated=40, n_workers=3, window=10, seed=1)
    return data


def _fit(data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unconverged and collapsed after so few epochs
        return cz.fit(cz.BayesSCDC(**MODEL), data, **{**FIT, **kw})


def _same(a, b) -> None:
    """Two posteriors are one: the loop's state (every field), the clusters, the trace, the settings."""
    sa, sb = a.checkpoint["state"], b.checkpoint["state"]
    assert all(torch.equal(x, y) for x, y in zip(sa.q, sb.q))
    assert sa.nets.keys() == sb.nets.keys() and all(torch.equal(sa.nets[k], sb.nets[k]) for k in sa.nets)
    ma, mb = sa.adam["state"], sb.adam["state"]
    assert ma.keys() == mb.keys() and all(torch.equal(ma[i][k], mb[i][k]) for i in ma for k in ma[i])
    assert sa.adam["param_groups"] == sb.adam["param_groups"]
    assert torch.equal(sa.rng, sb.rng) and torch.equal(sa.perm, sb.perm)
    assert (sa.t, sa.total, sa.seed) == (sb.t, sb.total, sb.seed)
    assert torch.equal(a.cluster_probs, b.cluster_probs) and torch.equal(a.x_mean, b.x_mean)
    assert all(torch.equal(a.net_state[k], b.net_state[k]) for k in a.net_state)
    np.testing.assert_array_equal(a.trace["elbo"], b.trace["elbo"])
    for k in ("init_bounds", "init_kept", "init_seed", "iterations"):
        assert a.settings[k] == b.settings[k], k


def _stop_at(n, exc=KeyboardInterrupt):
    """A callback that raises ``exc`` at its ``n``-th call (steps count on across initialisations)."""
    calls = [0]

    def callback(i, state):
        calls[0] += 1
        if calls[0] == n:
            raise exc("stop")
    return callback


@pytest.mark.parametrize("at", [5, STEPS + 8])
def test_an_interrupted_fit_resumes_to_the_same_posterior(data, tmp_path, at):
    """Ctrl-C during step 5 of 15 of the first of two initialisations (its checkpoint holds step 4:
    mid-epoch, in the warm-up), or during step 8 of the second, once the first is done (step 7: mid-epoch,
    after the k-means restart): the checkpoint written on KeyboardInterrupt, resumed, ends at the
    uninterrupted fit's posterior bit for bit (torch.equal on every tensor of the state: globals, weights,
    Adam's moments and step counts, generator, the epoch's order of the items)."""
    whole = _fit(data, n_init=2)
    assert whole.settings["iterations"] == STEPS and len(whole.trace["elbo"]) == FIT["n_epochs"]
    ckpt = tmp_path / "fit.ckpt"
    with pytest.raises(KeyboardInterrupt, match="resume="):
        _fit(data, n_init=2, checkpoint=ckpt, callback=_stop_at(at))
    _same(_fit(data, n_init=2, resume=ckpt), whole)


def test_a_crash_resumes_from_the_last_periodic_checkpoint(data, tmp_path):
    """checkpoint_every=4 steps: a fit that dies at step 10 (not a Ctrl-C: nothing written then) resumes
    from step 8's checkpoint to the same posterior."""
    whole = _fit(data, n_init=1)
    ckpt = tmp_path / "fit.ckpt"
    with pytest.raises(RuntimeError, match="stop"):
        _fit(data, n_init=1, checkpoint=ckpt, checkpoint_every=4, callback=_stop_at(10, RuntimeError))
    _same(_fit(data, n_init=1, resume=ckpt), whole)


def test_a_posterior_resumes_to_more_epochs(data):
    """resume= a posterior of 3 epochs, with n_epochs=5, continues its kept initialisation to the fit of
    5 epochs from the start (n_epochs counts the whole fit)."""
    short = _fit(data, n_init=2, n_epochs=3)
    longer = _fit(data, n_init=1, seed=short.settings["init_seed"])
    resumed = _fit(data, n_init=2, resume=short)
    assert resumed.settings["iterations"] == STEPS
    _same(resumed, longer)


def test_the_route_signature_carries_the_loop_settings():
    """The zoo (fit's check of settings) and the CLI (its flags, read from source) see the loop's
    settings, as for GPPL's natgrad."""
    e = zoo.entry("bayesscdc")
    for read in (zoo.route_settings(e.route("natgrad")), flags.route_settings_static(e, "natgrad")):
        assert {"checkpoint", "resume", "checkpoint_every", "callback", "tol", "n_init"} <= set(read)
    assert "n_init" in flags.route_settings_static(zoo.entry("scdc"), "svi")


def test_tol_stops_at_the_end_of_an_epoch_once_the_epoch_bound_settles(data):
    """tol > 0: the stop rule reads the bound averaged over each epoch; the fit stops at an epoch's end,
    not before the warm-up and two epochs more, once that bound changed by less than tol (relative)."""
    post = _fit(data, n_init=1, n_epochs=40, tol=0.05)
    st, trace = post.settings, post.trace["elbo"]
    steps = 3
    print(f"stopped after {st['iterations']} steps ({len(trace)} epochs of 40): {st['stop_reason']}")
    assert st["converged"] and st["stop_reason"] == "converged"
    assert st["iterations"] == steps * len(trace) and (FIT["warmup"] + 2) <= len(trace) < 40
    assert abs(trace[-1] - trace[-2]) < 0.05 * abs(trace[-2])
