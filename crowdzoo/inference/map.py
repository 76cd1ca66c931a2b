"""Maximum a posteriori by L-BFGS on a Pyro model's log joint: a generic engine (as svi and nuts).

Pyro's ``initialize_model`` gives the potential energy U(θ) = −log p(θ, y) over the unconstrained
latent sites (the same function NUTS samples from; constrained sites enter through their bijections
and the log-Jacobians); L-BFGS with a strong-Wolfe line search minimises it from the sites' prior
medians. For sites on the real line the result is the MAP; for constrained sites (a scale) it is the
mode of the density of the unconstrained value (e.g. of log s), which is what an optimiser over
the unconstrained space can find. The posterior is the single point (one component, weight 1).
"""
from __future__ import annotations

import functools
import warnings

import numpy as np
import torch
from pyro.infer.autoguide.initialization import init_to_median
from pyro.infer.mcmc.util import initialize_model

from ..core.seeds import isolated
from ..errors import ConvergenceWarning, NumericalError


def fit_map(model, data, seed: int = 0, max_iter: int = 500, tol: float = 1e-9, setup=None,
            progress_bar=None, *, entry):
    """Fit by MAP (module docstring). ``max_iter`` L-BFGS iterations; stop when the largest gradient
    entry or the change of U falls below ``tol``; unconverged fits warn."""
    with isolated(seed):
        setup = setup or model.setup(data, seed=seed)
        fn, args = model.program(setup, data, None)
        model_fn = functools.partial(fn, *args)
        init, potential_fn, transforms, _ = initialize_model(model_fn, init_strategy=init_to_median)
    names = sorted(init)
    params = [init[n].detach().clone().requires_grad_(True) for n in names]
    opt = torch.optim.LBFGS(params, max_iter=max_iter, line_search_fn="strong_wolfe",
                            tolerance_grad=tol, tolerance_change=tol)
    losses = []

    def closure():
        opt.zero_grad()
        loss = potential_fn(dict(zip(names, params)))
        loss.backward()
        losses.append(float(loss.detach()))
        return loss

    opt.step(closure)
    if not np.isfinite(losses[-1]):
        raise NumericalError("MAP: the log joint became NaN. Try: a tighter prior or fewer parameters.")
    grad = torch.cat([p.grad.reshape(-1) for p in params])
    converged = float(grad.abs().max()) <= 1e-5 * max(1.0, abs(losses[-1])) or (
        len(losses) >= 2 and abs(losses[-1] - losses[-2]) <= tol * max(1.0, abs(losses[-1])))
    if not converged:
        warnings.warn(ConvergenceWarning(
            f"MAP: L-BFGS stopped after {{max_iter={max_iter}}} iterations without meeting its tolerances "
            f"(largest gradient {float(grad.abs().max()):.3g}). Try a larger {{max_iter}}.",
            settings=("max_iter",)), stacklevel=3)
    with torch.no_grad():
        sites = {n: transforms[n].inv(p.detach())[None] for n, p in zip(names, params)}
    return entry.posterior_class().from_draws(
        model, setup, data, sites, "map", trace={"loss": np.asarray(losses)},
        settings=dict(seed=seed, max_iter=max_iter, tol=tol, converged=bool(converged),
                      iterations=len(losses)))
