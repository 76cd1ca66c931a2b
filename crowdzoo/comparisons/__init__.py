"""Declarative comparisons that reproduce the papers' tables side by side with our numbers."""
from __future__ import annotations

import concurrent.futures as cf

import pandas as pd

from . import crowd_routes, gppl_routes, simulation

REGISTRY = {"gppl-routes": gppl_routes, "crowdgppl-routes": crowd_routes,
            "simulation-consensus": simulation.consensus, "simulation-personal": simulation.personal,
            "simulation-components": simulation.components}


def run(name: str, repeats: int = 1, jobs: int = 1, quick: bool = False, executor=None):
    """Run comparison ``name`` for ``repeats`` seeds (in parallel through ``executor`` or a local
    process pool of ``jobs`` workers). Returns (tidy DataFrame, markdown table)."""
    mod = REGISTRY[name]
    seeds = list(range(repeats))
    if executor is None and jobs > 1:
        # one torch thread per worker: jobs × torch's default threads oversubscribe the cores
        with cf.ProcessPoolExecutor(max_workers=jobs, initializer=_one_thread) as ex:
            frames = list(ex.map(_call, [(name, s, quick) for s in seeds]))
    elif executor is not None:
        frames = list(executor.map(_call, [(name, s, quick) for s in seeds]))
    else:
        frames = [mod.run_one(s, quick=quick) for s in seeds]
    df = pd.concat(frames, ignore_index=True)
    return df, mod.summarise(df)


def _one_thread():
    import torch

    torch.set_num_threads(1)


def _call(args):
    name, seed, quick = args
    return REGISTRY[name].run_one(seed, quick=quick)


__all__ = ["run", "REGISTRY"]
