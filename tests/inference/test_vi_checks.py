"""Variational and NUTS fits judged by the report: the guide recorded by name and settings, svi's ELBO
plateau (a warning at fit time and a check in the report), PSIS-LOO of svi draws that does not turn to
fail as the fit converges, and NUTS whose trajectories mostly hit max_tree_depth failing."""
from __future__ import annotations

import warnings

import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.infer.autoguide import AutoLowRankMultivariateNormal

import crowdzoo as cz
from crowdzoo.diagnostics import checks as ck

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny matrices: one torch thread


@pytest.fixture(scope="module")
def tiny():
    data, _ = cz.simulate_gppl(n_items=8, n_pairs=80, n_features=2, seed=5)
    return data


def test_the_guide_is_recorded_by_name_and_settings(tiny):
    low = cz.fit(cz.BradleyTerry(), tiny, method="svi", num_steps=20,
                 guide=lambda m: AutoLowRankMultivariateNormal(m, rank=3))
    assert low.settings["guide"] == "AutoLowRankMultivariateNormal(rank=3)"
    assert cz.fit(cz.BradleyTerry(), tiny, method="svi", num_steps=20).settings["guide"] == \
        "AutoMultivariateNormal"

    def my_guide(setup, a, b, y, subsample_size=None):
        loc = pyro.param("f_loc", torch.zeros(setup.n_items, dtype=torch.float64))
        pyro.sample("f", dist.Normal(loc, 0.3).to_event(1))

    hand = cz.fit(cz.BradleyTerry(), tiny, method="svi", num_steps=20, guide=my_guide)
    assert hand.settings["guide"] == f"{__name__}.{my_guide.__qualname__}"
    example = cz.zoo.entry("crowdgppl").make_example()  # crowdGPPL's default: its hand-written guide
    crowd = cz.fit(example.model, example.data, method="svi", num_steps=5)
    assert crowd.settings["guide"] == "crowdzoo.models.crowdgppl.guide.crowdgppl_meanfield"


def test_a_point_guide_gives_a_posterior_that_predicts(tiny):
    """AutoDelta (MAP by svi, as docs/guides/swap-a-guide.md shows it) gives draws that are its
    parameters themselves: the posterior holds them detached, predicts, and its draws are one point
    at the MAP route's mode."""
    from pyro.infer.autoguide import AutoDelta

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        point = cz.fit(cz.BradleyTerry(), tiny, method="svi", guide=AutoDelta, num_steps=800, lr=0.05,
                       n_draws=20)
        mode = cz.fit(cz.BradleyTerry(), tiny, method="map")
    assert point.settings["guide"] == "AutoDelta"
    p = point.predict_proba(tiny.item_ids[tiny.a[:5]], tiny.item_ids[tiny.b[:5]])
    assert np.all((p > 0) & (p < 1))
    mean, var = point.utilities()
    assert float(var.max()) < 1e-12
    np.testing.assert_allclose(mean.to_numpy(), mode.utilities()[0].to_numpy(), atol=0.02)


def scdc_tempered(batch, nets, g, temp=2.0):
    """SCDC's amortised guide with q(z | o)'s logits divided by a temperature."""
    B = batch.O.shape[0]
    pyro.module("scdc", nets)
    with pyro.plate("items", B), pyro.poutine.scale(scale=batch.item_scale), \
            pyro.poutine.mask(mask=torch.arange(B) < batch.n_uniform):
        z = pyro.sample("z", dist.Categorical(logits=nets.z_logits(batch.O) / temp))
        m, s = nets.x_params(batch.O, torch.nn.functional.one_hot(z, nets.K).float())
        pyro.sample("x", dist.Normal(m, s).to_event(1))


def test_scdc_records_its_guide_by_name_and_settings():
    """SCDC's svi route names a guide as the generic svi route does (module.function, through a
    functools.partial that sets it up) and records the particles per step it ran with; its own
    default is the amortised guide."""
    import functools

    example = cz.zoo.entry("scdc").make_example()
    run = dict(n_epochs=1, n_init=1, progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        own = cz.fit(example.model, example.data, **run)
        swapped = cz.fit(example.model, example.data, guide=functools.partial(scdc_tempered, temp=1.5),
                         num_particles=2, **run)
    assert own.settings["guide"] == "amortised"
    assert swapped.settings["guide"] == f"{__name__}.scdc_tempered"
    assert swapped.settings["num_particles"] == 2


@pytest.fixture(scope="module")
def svi_problem():
    """30 items, 600 labels: enough labels for the ELBO's noise to show a rise over 200 steps."""
    return cz.simulate_gppl(n_items=30, n_pairs=600, seed=1)[0]


def _checks(post, path):
    return {c.name: c for c in cz.report(post, path).checks}


def test_an_elbo_still_rising_warns_at_fit_time_and_in_the_report(svi_problem, tmp_path):
    with pytest.warns(cz.ConvergenceWarning, match=r"ELBO was still rising .* of \|ELBO\|"):
        short = cz.fit(cz.GPPL(), svi_problem, method="svi", num_steps=200, lr=0.005)
    assert short.settings["elbo_rel_change"] > 2 * short.settings["elbo_rel_noise"] > 0
    c = _checks(short, tmp_path / "short.md")
    assert c["ELBO plateau"].verdict == "warn" and "raise num_steps" in c["ELBO plateau"].detail
    assert c["PSIS-LOO"].verdict in ("pass", "warn"), c["PSIS-LOO"].detail
    tree = short.to_arviz(n_draws=50)
    tree.attrs.update(converged=1, elbo_rel_change=1e-4)  # the same record of a run that levelled off
    assert ck.optimisation(tree)[0].verdict == "pass"


@pytest.mark.slow
def test_loo_of_svi_draws_does_not_turn_to_fail_as_the_fit_converges(svi_problem, tmp_path):
    """GPPL svi at 200 steps (still climbing) and at 2000 (a plateau): PSIS-LOO of either fit's draws may
    warn (k̂ also measures the guide's distance from the posterior) but fails neither."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cz.ConvergenceWarning)
        short = cz.fit(cz.GPPL(), svi_problem, method="svi", num_steps=200, lr=0.005)
    with warnings.catch_warnings():
        warnings.simplefilter("error", cz.ConvergenceWarning)
        long = cz.fit(cz.GPPL(), svi_problem, method="svi", num_steps=2000, lr=0.02)
    checks = {name: _checks(p, tmp_path / f"{name}.md") for name, p in (("short", short), ("long", long))}
    assert checks["short"]["ELBO plateau"].verdict == "warn"
    assert checks["long"]["ELBO plateau"].verdict == "pass"
    for name in ("short", "long"):
        assert checks[name]["PSIS-LOO"].verdict in ("pass", "warn"), checks[name]["PSIS-LOO"].detail


def test_nuts_with_most_trees_at_the_maximum_depth_fails(tiny):
    capped = cz.fit(cz.BradleyTerry(), tiny, method="nuts", num_samples=60, warmup_steps=60, num_chains=1,
                    max_tree_depth=1)
    depth = {c.name: c for c in ck.sampler(capped.to_arviz())}["tree depth"]
    assert depth.verdict == "fail" and "max_tree_depth (now 1)" in depth.detail, depth.value
    free = cz.fit(cz.BradleyTerry(), tiny, method="nuts", num_samples=60, warmup_steps=60, num_chains=1)
    assert {c.name: c for c in ck.sampler(free.to_arviz())}["tree depth"].verdict == "pass"
    assert np.asarray(free.to_arviz().sample_stats["tree_depth"]).max() < 10
