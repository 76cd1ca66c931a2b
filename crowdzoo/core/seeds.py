"""One seed convention for every route.

A route takes ``seed`` (an int) and draws all of its randomness from generators made from it:
``torch.Generator().manual_seed(seed)`` for torch, ``numpy.random.default_rng(seed)`` for numpy.
Routes that run Pyro's own samplers (SVI, NUTS), which read torch's global RNG, run inside
:func:`isolated`, which seeds the global RNGs and restores them afterwards: a fit never changes the
caller's random state, and two fits with the same seed give bit-identical posteriors.
"""
from __future__ import annotations

import contextlib
import random

import numpy as np
import torch


@contextlib.contextmanager
def isolated(seed: int):
    """Seed torch's, numpy's and Python's global RNGs with ``seed`` (as ``pyro.set_rng_seed``) for
    the duration of the block, and put the caller's states back afterwards."""
    torch_state = torch.get_rng_state()
    np_state = np.random.get_state()
    py_state = random.getstate()
    try:
        torch.manual_seed(int(seed))
        np.random.seed(int(seed) % 2**32)
        random.seed(int(seed))
        yield
    finally:
        torch.set_rng_state(torch_state)
        np.random.set_state(np_state)
        random.setstate(py_state)
