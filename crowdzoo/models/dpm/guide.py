"""The default svi guide of the DPM community model.

The truncated program is symmetric in its T communities: a guide started with every community's
u_c at the same point (``init_to_median`` gives u_c = 0 for all c) gets the same gradient for each,
up to the weights π_c, and the communities never separate. AutoNormal (mean field over λ, β and u,
in the unconstrained space) started from a draw of the prior breaks the symmetry; the draw comes
from the global RNG, which the svi engine seeds with the fit's seed.
"""
from __future__ import annotations

from pyro.infer.autoguide import AutoNormal, init_to_sample


def default_guide(model_fn, args, seed: int = 0):
    """AutoNormal from a prior draw (``init_to_sample``), initial scale 0.05."""
    return AutoNormal(model_fn, init_loc_fn=init_to_sample, init_scale=0.05)
