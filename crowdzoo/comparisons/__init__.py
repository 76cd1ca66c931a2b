"""Declarative comparisons that reproduce the papers' tables side by side with our numbers."""
from __future__ import annotations

import concurrent.futures as cf

import pandas as pd

from . import (
    collabgp,
    crowd_defaults,
    crowd_routes,
    dpm,
    gppl_routes,
    scdc,
    simulation,
    sushi,
    synthetic_sushi,
    ukpconvarg,
    ukpconvarg_diagnostics,
)

REGISTRY = {"gppl-routes": gppl_routes, "crowdgppl-routes": crowd_routes,
            "crowdgppl-defaults": crowd_defaults,
            "simulation-consensus": simulation.consensus, "simulation-personal": simulation.personal,
            "simulation-components": simulation.components, "sushi-a-small": sushi.sushi_a_small,
            "sushi-a": sushi.sushi_a, "sushi-b": sushi.sushi_b,
            "synthetic-sushi": synthetic_sushi, "synthetic-sushi-nuts": synthetic_sushi.nuts,
            "ukpconvarg-consensus": ukpconvarg.consensus, "ukpconvarg-personal": ukpconvarg.personal,
            "collabgp-synthetic": collabgp.synthetic, "collabgp-sushi": collabgp.sushi,
            "collabgp-active-synthetic": collabgp.active_synthetic,
            "collabgp-active-sushi": collabgp.active_sushi, "collabgp-evidence": collabgp.evidence,
            "collabgp-routes": collabgp.routes, "ukpconvarg-diagnostics": ukpconvarg_diagnostics,
            "dpm-simulation": dpm, "dpm-sushi-a": sushi.dpm_sushi_a,
            "scdc-pinwheel": scdc.pinwheel, "scdc-digits": scdc.digits, "scdc-mnist": scdc.mnist}


def run(name: str, repeats: int = 1, jobs: int = 1, quick: bool = False, executor=None,
        data_dir=None):
    """Run comparison ``name`` for ``repeats`` seeds (in parallel through ``executor`` or a local
    process pool of ``jobs`` workers). ``data_dir``: where the comparisons that read data the zoo
    cannot ship (Sushi) find it. Returns (tidy DataFrame, markdown table)."""
    mod = REGISTRY[name]
    seeds = list(range(repeats))
    # only the comparisons against a paper's table read data from a path
    opts = {}
    if hasattr(mod, "needs_data_dir"):
        opts["data_dir"] = None if data_dir is None else str(data_dir)
    args = [(name, s, quick, opts) for s in seeds]
    if executor is None and jobs > 1:
        # one torch thread per worker: jobs × torch's default threads oversubscribe the cores
        with cf.ProcessPoolExecutor(max_workers=jobs, initializer=_one_thread) as ex:
            frames = list(ex.map(_call, args))
    elif executor is not None:
        frames = list(executor.map(_call, args))
    else:
        frames = [_call(x) for x in args]
    df = pd.concat(frames, ignore_index=True)
    return df, mod.summarise(df)


def _one_thread():
    import torch

    torch.set_num_threads(1)


def _call(args):
    name, seed, quick, opts = args
    return REGISTRY[name].run_one(seed, quick=quick, **opts)


__all__ = ["run", "REGISTRY"]
