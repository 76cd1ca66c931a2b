"""Declarative comparisons that reproduce the papers' tables side by side with our numbers, and
one's own: a :class:`Comparison` (settings → rows) run by :func:`run` or ``crowdzoo compare
module:attribute``."""
from __future__ import annotations

import concurrent.futures as cf

import pandas as pd

from ..errors import DataError
from . import (
    active,
    calibration,
    choices,
    collabgp,
    crowd_defaults,
    crowd_priors,
    crowd_routes,
    crowd_scale_prior,
    dpm,
    gppl_kernel,
    gppl_routes,
    sbc,
    scdc,
    scdc_crowd,
    simulation,
    sushi,
    synthetic_sushi,
    ties,
    ukpconvarg,
    ukpconvarg_diagnostics,
)
from .comparison import Comparison, Result, load

REGISTRY = {"active": active, "active-gppl": active.pairwise, "calibration": calibration,
            "gppl-kernel": gppl_kernel, "gppl-routes": gppl_routes,
            "crowdgppl-routes": crowd_routes,
            "crowdgppl-defaults": crowd_defaults,
            "crowdgppl-scale-prior": crowd_scale_prior, "crowdgppl-priors": crowd_priors,
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
            "scdc-pinwheel": scdc.pinwheel, "scdc-digits": scdc.digits, "scdc-mnist": scdc.mnist,
            "scdc-crowd": scdc_crowd, "ties": ties, "choices": choices, "sbc": sbc}


def as_comparison(what) -> Comparison:
    """A comparison from a name of the zoo's (:data:`REGISTRY`), an import path ``module:attribute``
    (:func:`~.comparison.load`), a :class:`Comparison`, or an object :meth:`Comparison.of` wraps."""
    if isinstance(what, str):
        if what in REGISTRY:
            return Comparison.of(REGISTRY[what])
        if ":" not in what:
            raise DataError(f"comparison: unknown comparison {what!r}; choose one of {sorted(REGISTRY)}, or "
                            "name your own as module:attribute (a crowdzoo.comparisons.Comparison, or an "
                            "object with run_one(seed, quick=...) and summarise(df))", arg="comparison")
        what = load(what)
    return Comparison.of(what)


def run(name, repeats: int = 1, jobs: int = 1, quick: bool = False, executor=None,
        data_dir=None) -> Result:
    """Run comparison ``name`` for ``repeats`` seeds (0, 1, …) and return a :class:`Result`: the tidy
    DataFrame of every repeat's rows and the Markdown page (it unpacks as ``df, table``; its ``latex``
    and ``write`` give the tables for a paper and the files).

    ``name``: a key of ``REGISTRY``; an import path ``module:attribute`` of one's own; a
    :class:`Comparison`; or an object with ``run_one(seed, quick=...)`` → tidy DataFrame and
    ``summarise(df)`` → Markdown (:meth:`Comparison.of`). On other processes a comparison named by a
    string is loaded there by that name; one given as an object travels pickled (its ``rows`` and
    settings must then be picklable: functions of an importable module, not lambdas).

    The repeats run in this process (``jobs=1``), in a local process pool of ``jobs`` workers, or on
    ``executor``: a ``concurrent.futures.Executor`` (a Dask cluster's ``client.get_executor()`` is
    one) or a ``dask.distributed.Client``. On an executor each repeat is its own future, so Dask
    reruns a repeat whose worker died (up to ``distributed.scheduler.allowed-failures`` times); the
    frames are put together in seed order and every repeat runs with one torch thread, as in the
    local pool, so the table is the local pool's. ``data_dir``: where the comparisons that read data
    the zoo cannot ship (Sushi) find it."""
    comparison = as_comparison(name)
    seeds = list(range(repeats))
    # only the comparisons against a paper's table read data from a path
    opts = {"data_dir": None if data_dir is None else str(data_dir)} if comparison.needs_data_dir else {}
    # a comparison named by a string travels by name (the worker loads it); an object by its run_one
    what = name if isinstance(name, str) else comparison.run_one
    args = [(what, s, quick, opts) for s in seeds]
    if executor is None and jobs > 1:
        # one torch thread per worker: jobs × torch's default threads oversubscribe the cores
        with cf.ProcessPoolExecutor(max_workers=jobs, initializer=_one_thread) as ex:
            frames = list(ex.map(_call, args))
    elif executor is not None:
        frames = _on_executor(executor, args)
    else:
        frames = [_call(x) for x in args]
    df = pd.concat(frames, ignore_index=True)
    return Result(df, comparison.summarise(df))


def _on_executor(executor, args):
    """Submit each repeat as its own future and return the frames in the order of ``args`` (seeds)."""
    if not isinstance(executor, cf.Executor):
        get_executor = getattr(executor, "get_executor", None)  # a dask.distributed.Client
        if get_executor is None:
            raise TypeError(f"executor: expected a concurrent.futures.Executor or a dask.distributed.Client, "
                            f"got {type(executor).__name__}")
        # pure=False: a repeat is a new task each run (fits are timed), not a cached result
        executor = get_executor(pure=False)
    futures = [executor.submit(_call_one_thread, a) for a in args]
    try:
        return [f.result() for f in futures]
    except BaseException:
        for f in futures:
            f.cancel()
        raise


def _one_thread():
    import torch

    torch.set_num_threads(1)


def _call_one_thread(args):
    """``_call`` with one torch thread (as in the local pool, whose numbers the table must repeat)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _call(args)
    finally:
        torch.set_num_threads(n)


def _call(args):
    what, seed, quick, opts = args
    run_one = as_comparison(what).run_one if isinstance(what, str) else what
    return run_one(seed, quick=quick, **opts)


__all__ = ["run", "REGISTRY", "Comparison", "Result", "as_comparison", "load"]
