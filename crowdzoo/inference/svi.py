"""Pyro SVI on a crowdzoo model, with any guide.

A generic engine: it runs any model that offers ``model.setup(data, seed)`` and
``model.program(setup, data, subsample_size) -> (Pyro model function, its arguments)``, and builds
the posterior with ``Posterior.from_draws`` of the model's posterior class (both named in the zoo's
table). Mini-batches go through the model's ``pyro.plate(..., subsample_size=...)``, which scales
the likelihood by P / P_i. The default guide is the model's (the table's ``guide``; crowdGPPL's is
the structured mean field of Eq. 20), else ``AutoMultivariateNormal`` over the latent sites, which
keeps their correlations. Pass ``guide=`` to swap it:

* an AutoGuide class (``AutoNormal``, ``AutoLowRankMultivariateNormal`` ...),
* a factory ``lambda model: AutoNormal(model, init_scale=0.05)``,
* or a guide function with the Pyro model's signature (``guide(setup, a, b, y, subsample_size)``
  for GPPL, ``guide(setup, a, b, j, y, subsample_size)`` for crowdGPPL, ``guide(setup,
  subsample_size)`` for collabGP).

After optimisation ``n_draws`` draws of the guide form the posterior (zero-covariance
components). Pyro's parameter store is cleared first.

``learn_kernel=True`` asks the model's program for a version whose kernel hyper-parameters are
``pyro.param`` s of the model itself (GPPL: the ARD length-scales), optimised with the guide by the
same ELBO (a type-II maximum likelihood point estimate inside variational inference). Their final
values reach ``Posterior.from_draws`` as ``params=``. A model whose program has no ``learn_kernel``
is refused with a DataError naming the setting.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import warnings

import numpy as np
import pyro
import torch
from pyro.infer import SVI, JitTrace_ELBO, Trace_ELBO
from pyro.infer.autoguide import AutoGuide, AutoMultivariateNormal, init_to_median
from pyro.optim import ClippedAdam
from pyro.poutine.util import site_is_subsample

from ..core.seeds import isolated
from ..errors import ConvergenceWarning, DataError, NumericalError
from .common import check_finite, progress, summary

#: what to try when the ELBO becomes NaN, naming the route's settings by placeholders
ADVICE = "a smaller {lr}, a larger {subsample_size}, or a guide with init_scale≈0.01"
ADVICE_SETTINGS = ("lr", "subsample_size")


def make_guide(guide, model_fn, args, default=None, seed: int = 0):
    """The guide to run: the model's default (``default(model_fn, args, seed)``, from the zoo's
    table) or AutoMultivariateNormal when ``guide`` is None; an AutoGuide class; a factory
    ``lambda model: Guide(model)``; or a guide function with the Pyro model's signature."""
    if guide is None and default is not None:
        return default(model_fn, args, seed)
    if guide is None:
        return AutoMultivariateNormal(model_fn, init_loc_fn=init_to_median, init_scale=0.05)
    if isinstance(guide, type) and issubclass(guide, AutoGuide):
        return guide(model_fn)
    if isinstance(guide, AutoGuide):
        raise TypeError("guide: pass the AutoGuide class or a factory `lambda model: Guide(model)`, "
                        "not an instance built for another model")
    n_params = len(inspect.signature(guide).parameters)
    if n_params >= 2:  # a guide with the model's signature (a factory takes the model alone)
        return functools.partial(guide, *args)
    return guide(model_fn)


def guide_name(q) -> str:
    """The guide as the fit ran it, for ``settings["guide"]``: an AutoGuide by its class and the
    settings that shape it (``AutoLowRankMultivariateNormal(rank=5)``), a hand-written guide (or a
    ``functools.partial`` of one) by its qualified function name (``module.function``)."""
    if isinstance(q, AutoGuide):
        rank = getattr(q, "rank", None)
        return type(q).__name__ + (f"(rank={int(rank)})" if rank is not None else "")
    fn = q
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{getattr(fn, '__module__', None) or type(fn).__module__}.{name}"


def program_of(model, setup, data, subsample_size, learn_kernel: bool, name: str, route: str = "svi"):
    """``model.program(...)``, with ``learn_kernel=True`` passed on only when asked (and refused,
    naming the setting, for a model whose program cannot learn its kernel)."""
    if not learn_kernel:
        return model.program(setup, data, subsample_size)
    if "learn_kernel" not in inspect.signature(model.program).parameters:
        raise DataError(f"learn_kernel: {name}'s {route} route cannot learn the kernel's hyper-parameters; "
                        "use {learn_kernel=False} (or a route that learns them: `crowdzoo models`)",
                        arg="learn_kernel", settings=("learn_kernel",))
    return model.program(setup, data, subsample_size, learn_kernel=True)


def plateau(losses: np.ndarray, share: float = 0.1) -> dict | None:
    """Whether a run of stochastic SVI losses (−ELBO per step) has reached a plateau: the ELBO
    smoothed over each of the last two ``share`` of the steps (window means), its rise from the
    earlier window to the last relative to |ELBO| (``elbo_rel_change``), the noise of that rise (the
    standard error of the difference of two means, ``elbo_rel_noise``, also relative), and
    ``settled``: the rise is within twice its noise or 0.1 % of |ELBO|, whichever is larger. Runs of
    fewer than 100 steps are too short to judge (None)."""
    n = int(len(losses) * share)
    if n < 10:
        return None
    before, last = losses[-2 * n:-n], losses[-n:]
    noise = np.sqrt(before.var(ddof=1) / n + last.var(ddof=1) / n)
    rise, scale = before.mean() - last.mean(), max(abs(last.mean()), 1e-12)
    return {"settled": bool(rise <= max(2.0 * noise, 1e-3 * scale)), "elbo_rel_change": float(rise / scale),
            "elbo_rel_noise": float(noise / scale)}


def settled(losses: np.ndarray, share: float = 0.1) -> bool | None:
    """:func:`plateau`'s verdict alone: True, False, or None for a run too short to judge."""
    p = plateau(losses, share)
    return None if p is None else p["settled"]


def fit_svi(model, data, seed: int = 0, guide=None, num_steps: int = 3000, lr: float = 0.01,
            subsample_size: int | None = None, num_particles: int = 1, n_draws: int | None = None,
            jit: bool = False, learn_kernel: bool = False, progress_bar: bool | None = None, setup=None,
            *, entry):
    """Fit by Pyro SVI (Trace_ELBO, ClippedAdam with learning rate ``lr``); the posterior holds
    ``n_draws`` draws of the guide (default: the model's, from the zoo's table).

    ``jit=True`` compiles the ELBO with TorchScript (Pyro's ``JitTrace_ELBO``): the same objective,
    fewer Python calls per step; a custom guide must then have no Python control flow on tensor
    values. ``learn_kernel``: the kernel's length-scales as parameters of the model, optimised by the
    ELBO (module docstring; GPPL: from the median heuristic). Runs with the global RNGs seeded by
    ``seed`` and restored afterwards. Pyro checks the model's and guide's distributions (their
    arguments and the observations' support) at the first step only (when its validation is on); the
    later steps run without those checks (a fifth less time on a 25-item GPPL), and a
    parameter that turns NaN there stops the fit through the ELBO's finiteness check."""
    with isolated(seed):
        pyro.clear_param_store()
        n_draws = n_draws or entry.n_draws
        setup = setup or model.setup(data, seed=seed)
        fn, args = program_of(model, setup, data, subsample_size, learn_kernel, entry.name)
        model_fn = functools.partial(fn, *args)
        q = make_guide(guide, model_fn, args, entry.default_guide(), seed)
        svi = SVI(model_fn, q, ClippedAdam({"lr": lr, "lrd": 0.1 ** (1.0 / max(num_steps, 1))}),
                  loss=(JitTrace_ELBO(num_particles=num_particles, ignore_jit_warnings=True) if jit
                        else Trace_ELBO(num_particles=num_particles)))
        losses = np.empty(num_steps)
        with progress(num_steps, "svi", progress_bar) as bar:
            for i in range(num_steps):
                try:
                    with contextlib.nullcontext() if i == 0 else pyro.validation_enabled(False):
                        loss = svi.step()
                except ValueError as err:  # Pyro's validation at the first step (e.g. a NaN parameter)
                    raise NumericalError(f"SVI failed at step {i}: {str(err).splitlines()[0][:200]}. Try: "
                                         + ADVICE, settings=ADVICE_SETTINGS) from None
                check_finite(loss, "the ELBO", i, ADVICE, ADVICE_SETTINGS)
                losses[i] = loss
                if i % 50 == 0:
                    bar.set_postfix(elbo=f"{-loss:.2f}")
                bar.update()
        summary(bar, f"svi: {num_steps} steps, final ELBO {-losses[-1]:.6g} (mean of the last 100: "
                     f"{-losses[-100:].mean():.6g})")
        flat = plateau(losses)
        converged = None if flat is None else flat["settled"]
        if converged is False:
            warnings.warn(ConvergenceWarning(
                f"svi: the ELBO was still rising over the last tenth of its {num_steps} steps (by "
                f"{flat['elbo_rel_change']:.2g} of |ELBO|, noise {flat['elbo_rel_noise']:.2g}); give more "
                f"{{num_steps}} (e.g. {{num_steps={2 * num_steps}}}) or a larger {{lr}}",
                settings=("num_steps", "lr")), stacklevel=2)
        measured = {k: v for k, v in (flat or {}).items() if k != "settled"}
        nodes = pyro.poutine.trace(model_fn).get_trace().nodes
        names = [n for n, site in nodes.items()
                 if site["type"] == "sample" and not site["is_observed"] and not site_is_subsample(site)]
        params = {n: site["value"].detach().clone() for n, site in nodes.items() if site["type"] == "param"}
        draws = {n: [] for n in names}
        with torch.no_grad(), pyro.validation_enabled(False):  # the guide was checked at the first step
            for _ in range(n_draws):  # draws of the guide (no data inside a global-only guide)
                tr = pyro.poutine.trace(q).get_trace()
                for n in names:  # detached: AutoDelta's "draw" is its parameter itself
                    draws[n].append(tr.nodes[n]["value"].detach())
    extra = {"params": params} if learn_kernel else {}  # the model's own point-estimated parameters
    return entry.posterior_class().from_draws(
        model, setup, data, {n: torch.stack(v) for n, v in draws.items()}, "svi", trace={"loss": losses},
        settings=dict(seed=seed, num_steps=num_steps, iterations=num_steps, converged=converged, lr=lr,
                      subsample_size=subsample_size,
                      guide=guide_name(q), n_draws=n_draws, jit=jit, learn_kernel=learn_kernel, **measured),
        **extra)
