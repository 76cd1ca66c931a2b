"""collabGP's default guide for Pyro SVI: a mean-field normal started from a prior draw (the factor
model's symmetric point W = H = 0 is a saddle that a guide started at zero never leaves)."""
from __future__ import annotations

from pyro.infer.autoguide import AutoNormal, init_to_sample


def default_guide(model_fn, args, seed: int = 0):
    return AutoNormal(model_fn, init_loc_fn=init_to_sample, init_scale=0.05)
