"""NUTS on a crowdzoo model (Pyro), for small problems and as the reference route.

Chains run one after another with their own seeds: on a 2-core machine Pyro's multiprocess
chains deadlocked on a GP model and gave no speed-up (DESIGN.md). The model's GP algebra is fixed
before sampling (no kernel hyperparameters are sampled), so no Cholesky runs inside the sampler.
"""
from __future__ import annotations

import functools

import numpy as np
import pyro
import torch
from pyro.infer import MCMC, NUTS

from ._common import model_setup, posterior_from_draws, pyro_program


def fit_nuts(model, data, seed: int = 0, num_samples: int = 500, warmup_steps: int = 500,
             num_chains: int = 2, target_accept_prob: float = 0.8, max_tree_depth: int = 10,
             progress_bar: bool | None = False, setup=None):
    """Sample the posterior with NUTS; ``num_chains`` chains of ``num_samples`` draws each."""
    setup = setup or model_setup(model, data, seed)
    fn, args = pyro_program(model, setup, data, None)
    model_fn = functools.partial(fn, *args)
    draws, div, pe = {}, [], []
    for chain in range(num_chains):
        pyro.set_rng_seed(seed + 1000 * chain)
        kernel = NUTS(model_fn, target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth,
                      jit_compile=False)
        pe_chain = []

        def hook(kern, params, stage, i, pe_chain=pe_chain):
            if stage == "Sample":
                pe_chain.append(float(kern._potential_energy_last))

        mcmc = MCMC(kernel, num_samples=num_samples, warmup_steps=warmup_steps, hook_fn=hook,
                    disable_progbar=not progress_bar)
        mcmc.run()
        for name, value in mcmc.get_samples().items():
            draws.setdefault(name, []).append(value)
        d = np.zeros(num_samples, dtype=bool)
        d[np.asarray(kernel._divergences, dtype=int)] = True
        div.append(d)
        pe.append(np.asarray(pe_chain))
    return posterior_from_draws(model, setup, data, {k: torch.cat(v) for k, v in draws.items()}, "nuts",
                                n_chains=num_chains,
                                sample_stats={"diverging": np.stack(div), "potential_energy": np.stack(pe)},
                                settings=dict(seed=seed, num_samples=num_samples, warmup_steps=warmup_steps,
                                              num_chains=num_chains, target_accept_prob=target_accept_prob,
                                              max_tree_depth=max_tree_depth))
