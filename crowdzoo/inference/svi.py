"""Pyro SVI on a crowdzoo model, with any guide.

The model is run as written (``gppl_model``); mini-batches of pairs go through
``pyro.plate("pairs", P, subsample_size=...)``, which scales the likelihood by P / P_i. The
default guide is ``AutoMultivariateNormal`` over the (whitened) inducing utilities and log s, so
that the correlation between f_m and s is kept; pass ``guide=`` to swap it:

* an AutoGuide class (``AutoNormal``, ``AutoLowRankMultivariateNormal`` ...),
* a factory ``lambda model: AutoNormal(model, init_scale=0.05)``,
* or a guide function with the model's signature ``guide(setup, a, b, y, subsample_size)``.

After optimisation ``n_draws`` draws of the guide form the posterior (zero-covariance
components of :class:`~crowdzoo.posterior.GPPLPosterior`).
"""
from __future__ import annotations

import functools
import inspect

import numpy as np
import pyro
import torch
from pyro.infer import SVI, Trace_ELBO
from pyro.infer.autoguide import AutoGuide, AutoMultivariateNormal, init_to_median
from pyro.optim import ClippedAdam

from ..errors import NumericalError
from ..linalg import DTYPE
from ..models.gppl import gppl_model
from ..posterior import GPPLPosterior
from ._common import check_finite, label_tensors, progress


def make_guide(guide, model_fn, raw_model):
    if guide is None:
        return AutoMultivariateNormal(model_fn, init_loc_fn=init_to_median, init_scale=0.05)
    if isinstance(guide, type) and issubclass(guide, AutoGuide):
        return guide(model_fn)
    if isinstance(guide, AutoGuide):
        raise TypeError("guide: pass the AutoGuide class or a factory `lambda model: Guide(model)`, "
                        "not an instance built for another model")
    n_params = len(inspect.signature(guide).parameters)
    if n_params >= 4:  # a guide with the model's signature
        return functools.partial(guide, *raw_model)
    return guide(model_fn)


def fit_svi(model, data, seed: int = 0, guide=None, num_steps: int = 3000, lr: float = 0.01,
            subsample_size: int | None = None, num_particles: int = 1, n_draws: int = 1000,
            progress_bar: bool | None = None, setup=None) -> GPPLPosterior:
    """Fit by Pyro SVI (Trace_ELBO, ClippedAdam with learning rate ``lr``)."""
    pyro.set_rng_seed(seed)
    pyro.clear_param_store()
    setup = setup or model.setup(data.item_features, seed=seed)
    a, b, y = label_tensors(data)
    args = (setup, a, b, y, subsample_size)
    model_fn = functools.partial(gppl_model, *args)
    q = make_guide(guide, model_fn, args)
    svi = SVI(model_fn, q, ClippedAdam({"lr": lr, "lrd": 0.1 ** (1.0 / max(num_steps, 1))}),
              loss=Trace_ELBO(num_particles=num_particles))
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
    s_draws, f_draws = [], []
    with torch.no_grad():
        for _ in range(n_draws):  # draws of the guide (no data inside a global-only guide)
            tr = pyro.poutine.trace(q).get_trace()
            s = tr.nodes["s"]["value"]
            s_draws.append(s)
            f_draws.append(setup.L_mm @ tr.nodes["u"]["value"] / s.sqrt())
    s = torch.stack(s_draws).to(DTYPE)
    return GPPLPosterior(model=model, setup=setup, data=data, method="svi",
                         weights=torch.full((n_draws,), 1.0 / n_draws, dtype=DTYPE),
                         means=torch.stack(f_draws).to(DTYPE), covs=None, s=s,
                         trace={"loss": losses},
                         settings=dict(seed=seed, num_steps=num_steps, lr=lr,
                                       subsample_size=subsample_size, guide=type(q).__name__,
                                       n_draws=n_draws))
