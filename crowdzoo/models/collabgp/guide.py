"""collabGP's default guide for Pyro SVI: a mean-field normal started from a prior draw (the factor
model's symmetric point W = H = 0 is a saddle that a guide started at zero never leaves).

With ``lengthscale_prior`` (site "lengthscale") and ``user_lengthscale_prior`` ("user_lengthscale") the
same AutoNormal covers log ℓ (a Gaussian per dimension, in the unconstrained space, as the other
sites), started at the setup's length-scales (the median heuristic, where the fixed-kernel fit sits)
rather than at a prior draw: ℓ needs no symmetry breaking, and a draw far in the prior's tails would
start the GPs at a degenerate kernel.

The inverse scales s_h of the latent functions (``learn_scale``) start where the EP–VB route starts
q(s_d), at D/2 (g's prior variance 2 per unit of k_pref): a draw from the vague Gamma(1, 10⁻³) would
start every h_d at a scale near 10⁻³, where the labels barely move it.
"""
from __future__ import annotations

import torch
from pyro.infer.autoguide import AutoNormal, init_to_sample, init_to_value

from ...gp.linalg import DTYPE


def default_guide(model_fn, args, seed: int = 0):
    """AutoNormal from a prior draw (``init_to_sample``; ℓ from the setup's, s_h at D/2), initial scale
    0.05."""
    sides = getattr(args[0], "sides", None)  # collabgp_lengthscale_model's space
    start = {name: ell.detach().clone() for name, _, prior, ell in (sides() if callable(sides) else [])
             if prior is not None}
    if getattr(args[0], "scale_prior", None) is not None:
        start["s_h"] = torch.full((args[0].D,), 0.5 * args[0].D, dtype=DTYPE)
    init = init_to_value(values=start, fallback=init_to_sample) if start else init_to_sample
    return AutoNormal(model_fn, init_loc_fn=init, init_scale=0.05)
