"""NUTS on a crowdzoo model (Pyro), for small problems and as the reference route: a generic engine
over ``model.setup`` / ``model.program`` and the posterior class's ``from_draws`` (as svi).

Chains run one after another with their own seeds: on a 2-core machine Pyro's multiprocess
chains deadlocked on a GP model and gave no speed-up (DESIGN.md). With fixed kernels the model's GP
algebra is fixed before sampling, so no Cholesky runs inside the sampler. A model that samples its
length-scales (``lengthscale_prior=`` of GPPL, crowdGPPL, collabGP and the DPM; crowdGPPL's and
collabGP's ``user_lengthscale_prior=``) factorises K_mm at each step with a fixed jitter (smooth
in ℓ and traceable by ``jit_compile``); a factorisation that fails anyway is Pyro's NaN potential, a
divergence.
"""
from __future__ import annotations

import functools

import numpy as np
import torch
from pyro.infer import MCMC, NUTS

from ..core.seeds import isolated


class _RecordingNUTS(NUTS):
    """Pyro's NUTS that also records each iteration's tree depth (number of doublings) and the
    Hamiltonian at its start (ArviZ's ``tree_depth`` and ``energy``), which Pyro keeps private."""

    def _build_tree(self, z, r, z_grads, log_slice, direction, tree_depth, energy_current):
        self.last_depth = max(getattr(self, "last_depth", 0), tree_depth + 1)
        self.last_energy = float(energy_current)
        return super()._build_tree(z, r, z_grads, log_slice, direction, tree_depth, energy_current)


def fit_nuts(model, data, seed: int = 0, num_samples: int = 500, warmup_steps: int = 500,
             num_chains: int = 2, target_accept_prob: float = 0.8, max_tree_depth: int = 10,
             jit_compile: bool = True, progress_bar: bool | None = False, setup=None, *, entry):
    """Sample the posterior with NUTS; ``num_chains`` chains of ``num_samples`` draws each.

    ``jit_compile``: trace the potential energy and its gradient once with TorchScript (Pyro's
    ``jit_compile``); about twice as fast on the zoo's small problems, the same draws in
    distribution. Turn it off for a custom model with Python control flow on sampled values."""
    setup = setup or model.setup(data, seed=seed)
    fn, args = model.program(setup, data, None)
    model_fn = functools.partial(fn, *args)
    draws, div, pe, depth, energy = {}, [], [], [], []
    for chain in range(num_chains):
        kernel = _RecordingNUTS(model_fn, target_accept_prob=target_accept_prob,
                                max_tree_depth=max_tree_depth, jit_compile=jit_compile,
                                ignore_jit_warnings=True)
        rec = []  # (potential energy, tree depth, energy) per draw

        def hook(kern, params, stage, i, rec=rec):
            if stage == "Sample":
                rec.append((float(kern._potential_energy_last), getattr(kern, "last_depth", 0),
                            getattr(kern, "last_energy", float("nan"))))
            kern.last_depth = 0

        mcmc = MCMC(kernel, num_samples=num_samples, warmup_steps=warmup_steps, hook_fn=hook,
                    disable_progbar=not progress_bar)
        with isolated(seed + 1000 * chain):  # each chain its own seed; the caller's RNG untouched
            mcmc.run()
        for name, value in mcmc.get_samples().items():
            draws.setdefault(name, []).append(value)
        d = np.zeros(num_samples, dtype=bool)
        d[np.asarray(kernel._divergences, dtype=int)] = True
        div.append(d)
        rec = np.asarray(rec).reshape(-1, 3)
        pe.append(rec[:, 0])
        depth.append(rec[:, 1].astype(np.int64))
        energy.append(rec[:, 2])
    return entry.posterior_class().from_draws(
        model, setup, data, {k: torch.cat(v) for k, v in draws.items()}, "nuts", n_chains=num_chains,
        sample_stats={"diverging": np.stack(div), "potential_energy": np.stack(pe),
                      "tree_depth": np.stack(depth), "energy": np.stack(energy)},
        settings=dict(seed=seed, num_samples=num_samples, warmup_steps=warmup_steps, num_chains=num_chains,
                      target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth,
                      jit_compile=jit_compile))
