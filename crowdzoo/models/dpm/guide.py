"""The default svi guide of the DPM community model.

The truncated program is symmetric in its T communities: a guide started with every community's
u_c at the same point (``init_to_median`` gives u_c = 0 for all c) gets the same gradient for each,
up to the weights π_c, and the communities never separate. AutoNormal (mean field over λ, β and u,
in the unconstrained space) started from a draw of the prior breaks the symmetry; the draw comes
from the global RNG, which the svi engine seeds with the fit's seed.

With ``lengthscale_prior`` the same AutoNormal covers log ℓ (a Gaussian per dimension, as the other
sites), started at the setup's length-scales (the median heuristic, where the fixed-kernel fit sits)
rather than at a prior draw: ℓ needs no symmetry breaking, and a draw far in the prior's tails would
start every community's GP at a degenerate kernel.
"""
from __future__ import annotations

from pyro.infer.autoguide import AutoNormal, init_to_sample, init_to_value


def default_guide(model_fn, args, seed: int = 0):
    """AutoNormal from a prior draw (``init_to_sample``; ℓ from the setup's), initial scale 0.05."""
    space = args[0]
    init = init_to_sample
    if getattr(space, "prior", None) is not None:  # dpm_lengthscale_model with ℓ under a prior
        init = init_to_value(values={"lengthscale": space.ell0.clone()}, fallback=init_to_sample)
    return AutoNormal(model_fn, init_loc_fn=init, init_scale=0.05)
