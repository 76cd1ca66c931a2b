"""Hand-written Pyro guides for the zoo's models.

:func:`crowdgppl_meanfield` is the structured mean-field family of Eq. 20 (Simpson & Gurevych
2020) written over the model's whitened sites: q(u_t) q(s_t) Π_c q(u_v,c) q(u_w,c) q(s_v,c) q(s_w,c),
a full-covariance Gaussian per function (diagonal for independent users, whose prior is diagonal, and
for the item residual's q(u_r) q(s_r)) and a log-normal per inverse scale. The user-component means
start at small random values to break the V = W = 0 symmetry.

Length-scales under a prior (``CrowdGPPL(lengthscale_prior=...)``, site "lengthscale", and
"user_lengthscale"): q(log ℓ) is a full-covariance Gaussian over the D dimensions of each side, as
GPPL's default svi guide (AutoMultivariateNormal) treats log ℓ, less its cross-covariances with the
functions and scales, which Eq. 20's mean field drops for every factor. It starts at the setup's
length-scales (the median heuristic, Eq. 26: where the fixed-kernel fit sits) with scale 0.1.

The order effect (``CrowdGPPL(order_effect=True)``, site "order"): q(δ) is a Normal of its own, started at
the prior's mean with sd ``init_scale``.
"""
from __future__ import annotations

import pyro
import pyro.distributions as dist
import torch
from pyro.distributions import constraints

from ...gp.linalg import DTYPE


def _lognormal(name, shape, prior):
    mean = prior.mean
    if not torch.isfinite(mean).all():  # a heavy-tailed prior (e.g. HalfCauchy): start at its median
        mean = prior.icdf(torch.tensor(0.5, dtype=DTYPE)) if hasattr(prior, "icdf") else torch.ones(())
    loc0 = torch.log(torch.as_tensor(mean, dtype=DTYPE)).expand(shape).clone()
    loc = pyro.param(f"{name}_loc", loc0)
    scale = pyro.param(f"{name}_scale", torch.full(shape, 0.1, dtype=DTYPE), constraint=constraints.positive)
    return pyro.sample(name, dist.LogNormal(loc, scale))


def _lengthscales(space):
    """q(ℓ) per side whose length-scales are sampled (module docstring): ℓ = exp(x),
    x ~ N(m, L Lᵀ) over the side's D dimensions."""
    sides = getattr(space, "sides", None)
    for name, _, prior, start in ([] if sides is None else sides()):
        if prior is None:  # a pyro.param of the model (learn_kernel): not a latent site
            continue
        D = start.shape[0]
        loc = pyro.param(f"{name}_loc", torch.log(start.detach()).to(DTYPE).clone())
        tril = pyro.param(f"{name}_tril", 0.1 * torch.eye(D, dtype=DTYPE),
                          constraint=constraints.lower_cholesky)
        pyro.sample(name, dist.TransformedDistribution(dist.MultivariateNormal(loc, scale_tril=tril),
                                                       dist.transforms.ExpTransform()))


def crowdgppl_meanfield(setup, a, b, j, y, subsample_size=None, init_scale: float = 0.1, seed: int = 0):
    """Structured mean-field guide of Eq. 20 for :func:`~crowdzoo.models.crowdgppl.crowdgppl_model`
    (``setup`` a :class:`~crowdzoo.models.crowdgppl.setup.CrowdSetup`), and for
    :func:`~crowdzoo.models.crowdgppl.model.crowdgppl_lengthscale_model` (``setup`` its space), with a
    factor q(ℓ) per side whose length-scales are sampled."""
    _lengthscales(setup)
    if setup.tie_prior is not None:  # ties: a log-normal q(τ), or one per user
        if getattr(setup, "tie_per_user", False):
            with pyro.plate("users", setup.n_users, dim=-1):
                _lognormal("tau", (setup.n_users,), setup.tie_prior)
        else:
            _lognormal("tau", (), setup.tie_prior)
    C, M, M_u = setup.C, setup.M, setup.M_u
    eye = torch.eye(M, dtype=DTYPE)
    if setup.consensus:
        _lognormal("s_t", (), setup.priors["t"])
        loc = pyro.param("u_t_loc", torch.zeros(M, dtype=DTYPE))
        tril = pyro.param("u_t_tril", init_scale * eye, constraint=constraints.lower_cholesky)
        pyro.sample("u_t", dist.MultivariateNormal(loc, scale_tril=tril))
    if getattr(setup, "residual_prior", None) is not None:  # the item residual: diagonal, as q(r) of natgrad
        _lognormal("s_r", (), setup.residual_prior)
        N = setup.N
        loc = pyro.param("u_r_loc", torch.zeros(N, dtype=DTYPE))
        sd = pyro.param("u_r_scale", torch.full((N,), init_scale, dtype=DTYPE),
                        constraint=constraints.positive)
        pyro.sample("u_r", dist.Normal(loc, sd).to_event(1))
    prior = getattr(setup, "order_prior", None)
    if prior is not None:  # the order effect δ
        loc = pyro.param("order_loc", torch.as_tensor(prior.loc, dtype=DTYPE).clone())
        sd = pyro.param("order_scale", torch.tensor(init_scale, dtype=DTYPE), constraint=constraints.positive)
        pyro.sample("order", dist.Normal(loc, sd))
    with pyro.plate("components", C, dim=-1):
        _lognormal("s_v", (C,), setup.priors["v"])
        _lognormal("s_w", (C,), setup.priors["w"])
        loc = pyro.param("u_v_loc", torch.zeros(C, M, dtype=DTYPE))
        tril = pyro.param("u_v_tril", init_scale * eye.expand(C, M, M).clone(),
                          constraint=constraints.lower_cholesky)
        pyro.sample("u_v", dist.MultivariateNormal(loc, scale_tril=tril))
        g = torch.Generator().manual_seed(seed)
        loc = pyro.param("u_w_loc", lambda: torch.randn(C, M_u, generator=g, dtype=DTYPE))
        if setup.users is None:
            sd = pyro.param("u_w_scale", torch.full((C, M_u), init_scale, dtype=DTYPE),
                            constraint=constraints.positive)
            pyro.sample("u_w", dist.Normal(loc, sd).to_event(1))
        else:
            eye_u = torch.eye(M_u, dtype=DTYPE)
            tril = pyro.param("u_w_tril", init_scale * eye_u.expand(C, M_u, M_u).clone(),
                              constraint=constraints.lower_cholesky)
            pyro.sample("u_w", dist.MultivariateNormal(loc, scale_tril=tril))


def default_guide(model_fn, args, seed: int = 0):
    """The default svi guide of crowdGPPL: :func:`crowdgppl_meanfield` over the model's arguments."""
    import functools

    from .choices import crowdgppl_choice_model
    if getattr(model_fn, "func", model_fn) is crowdgppl_choice_model:  # choices: the same factors
        return functools.partial(crowdgppl_meanfield, args[0], None, None, None, None, seed=seed)
    return functools.partial(crowdgppl_meanfield, *args, seed=seed)
