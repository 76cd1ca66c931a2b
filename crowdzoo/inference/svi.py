"""Pyro SVI on a crowdzoo model, with any guide.

The model is run as written (``gppl_model``, ``crowdgppl_model``); mini-batches of pairs go through
``pyro.plate("pairs", P, subsample_size=...)``, which scales the likelihood by P / P_i. The
default guide for GPPL is ``AutoMultivariateNormal`` over the (whitened) inducing utilities and
log s, so that the correlation between f_m and s is kept; for crowdGPPL it is the structured
mean-field guide of Eq. 20 (:func:`crowdzoo.inference.guides.crowdgppl_meanfield`). Pass
``guide=`` to swap it:

* an AutoGuide class (``AutoNormal``, ``AutoLowRankMultivariateNormal`` ...),
* a factory ``lambda model: AutoNormal(model, init_scale=0.05)``,
* or a guide function with the model's signature (``guide(setup, a, b, y, subsample_size)``
  for GPPL, ``guide(setup, a, b, j, y, subsample_size)`` for crowdGPPL, ``guide(setup,
  subsample_size)`` for collabGP, whose default guide is ``AutoNormal`` started from a prior draw).

After optimisation ``n_draws`` draws of the guide form the posterior (zero-covariance
components of :class:`~crowdzoo.posterior.GPPLPosterior`).
"""
from __future__ import annotations

import functools
import inspect

import numpy as np
import pyro
import torch
from pyro.infer import SVI, JitTrace_ELBO, Trace_ELBO
from pyro.infer.autoguide import AutoGuide, AutoMultivariateNormal, AutoNormal, init_to_median, init_to_sample
from pyro.optim import ClippedAdam
from pyro.poutine.util import site_is_subsample

from ..errors import NumericalError
from ._common import (
    check_finite,
    is_collab,
    is_crowd,
    model_setup,
    posterior_from_draws,
    progress,
    pyro_program,
)


def make_guide(guide, model_fn, raw_model, crowd: bool = False, seed: int = 0, collab: bool = False):
    if guide is None and crowd:
        from .guides import crowdgppl_meanfield

        return functools.partial(crowdgppl_meanfield, *raw_model, seed=seed)
    if guide is None and collab:
        return AutoNormal(model_fn, init_loc_fn=init_to_sample, init_scale=0.05)
    if guide is None:
        return AutoMultivariateNormal(model_fn, init_loc_fn=init_to_median, init_scale=0.05)
    if isinstance(guide, type) and issubclass(guide, AutoGuide):
        return guide(model_fn)
    if isinstance(guide, AutoGuide):
        raise TypeError("guide: pass the AutoGuide class or a factory `lambda model: Guide(model)`, "
                        "not an instance built for another model")
    n_params = len(inspect.signature(guide).parameters)
    if n_params >= 2:  # a guide with the model's signature (a factory takes the model alone)
        return functools.partial(guide, *raw_model)
    return guide(model_fn)


def fit_svi(model, data, seed: int = 0, guide=None, num_steps: int = 3000, lr: float = 0.01,
            subsample_size: int | None = None, num_particles: int = 1, n_draws: int | None = None,
            jit: bool = False, progress_bar: bool | None = None, setup=None):
    """Fit by Pyro SVI (Trace_ELBO, ClippedAdam with learning rate ``lr``); the posterior holds
    ``n_draws`` draws of the guide (default 1000 for GPPL, 300 for crowdGPPL and collabGP).

    ``jit=True`` compiles the ELBO with TorchScript (Pyro's ``JitTrace_ELBO``): the same objective,
    fewer Python calls per step; a custom guide must then have no Python control flow on tensor
    values."""
    pyro.set_rng_seed(seed)
    pyro.clear_param_store()
    crowd = is_crowd(model)
    n_draws = n_draws or (300 if crowd or is_collab(model) else 1000)
    setup = setup or model_setup(model, data, seed)
    fn, args = pyro_program(model, setup, data, subsample_size)
    model_fn = functools.partial(fn, *args)
    q = make_guide(guide, model_fn, args, crowd=crowd, seed=seed, collab=is_collab(model))
    svi = SVI(model_fn, q, ClippedAdam({"lr": lr, "lrd": 0.1 ** (1.0 / max(num_steps, 1))}),
              loss=(JitTrace_ELBO(num_particles=num_particles, ignore_jit_warnings=True) if jit
                    else Trace_ELBO(num_particles=num_particles)))
    losses = np.empty(num_steps)
    with progress(num_steps, "svi", progress_bar) as bar:
        for i in range(num_steps):
            try:
                loss = svi.step()
            except ValueError as err:  # Pyro's validation of a NaN parameter
                raise NumericalError(
                    f"SVI failed at step {i}: {str(err).splitlines()[0][:200]}. Try: a smaller lr, "
                    "a larger subsample_size, or a guide with init_scale≈0.01") from None
            check_finite(loss, "the ELBO", i,
                         "a smaller lr, a larger subsample_size, or a guide with init_scale≈0.01")
            losses[i] = loss
            if i % 50 == 0:
                bar.set_postfix(elbo=f"{-loss:.2f}")
            bar.update()
    names = [n for n, site in pyro.poutine.trace(model_fn).get_trace().nodes.items()
             if site["type"] == "sample" and not site["is_observed"] and not site_is_subsample(site)]
    draws = {n: [] for n in names}
    with torch.no_grad():
        for _ in range(n_draws):  # draws of the guide (no data inside a global-only guide)
            tr = pyro.poutine.trace(q).get_trace()
            for n in names:
                draws[n].append(tr.nodes[n]["value"])
    return posterior_from_draws(model, setup, data, {n: torch.stack(v) for n, v in draws.items()}, "svi",
                                trace={"loss": losses},
                                settings=dict(seed=seed, num_steps=num_steps, lr=lr,
                                              subsample_size=subsample_size, guide=type(q).__name__,
                                              n_draws=n_draws, jit=jit))
