"""The torch.distributed process group of a torchrun launch: joined on first use (initialised from
torchrun's environment, gloo backend, unless the script has done it already) and closed at exit once
every rank is exiting. Below every other module but :mod:`crowdzoo.errors`, so that reading one rank's
shard of a file (:mod:`crowdzoo.data.shard`) and the distributed fits
(:mod:`crowdzoo.inference.distributed`) share it.
"""
from __future__ import annotations

import atexit
import datetime
import os
import sys

from .errors import DistributedError


def timeout_seconds() -> float:
    return float(os.environ.get("CROWDZOO_DISTRIBUTED_TIMEOUT", "300"))


def rank_and_world() -> tuple[int, int]:
    """(rank, world size) of the process group, initialised from torchrun's environment (gloo backend,
    ``CROWDZOO_DISTRIBUTED_TIMEOUT``) if the script has not done it already."""
    import torch.distributed as dist

    if not dist.is_available():
        raise DistributedError("distributed: this torch build has no torch.distributed")
    if not dist.is_initialized():
        missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
        if missing:
            raise DistributedError(f"distributed: no process group and no {missing[0]} in the environment; "
                                   "launch with `torchrun --nproc-per-node R script.py` (or initialise "
                                   "torch.distributed yourself) before fit(..., distributed=True)")
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_seconds()))
        atexit.register(_close)  # the group we opened closes before the interpreter tears down its threads
        _watch_for_failure()
    return dist.get_rank(), dist.get_world_size()


_EXIT = {"failed": False, "wait_s": 30.0}


def _watch_for_failure() -> None:
    """Note an exception that ends this process (sys.excepthook), so that :func:`_close` does not wait
    at exit for ranks that will never come."""
    previous = sys.excepthook

    def hook(*exc):
        _EXIT["failed"] = True
        previous(*exc)

    sys.excepthook = hook


def _close() -> None:
    """At exit, destroy the process group this module initialised, once every rank is exiting.

    Left to the interpreter's teardown, gloo's threads can abort the process ("terminate called
    without an active exception"). Destroyed while a peer has already closed its connections, they
    abort it too: measured, 11–14 of 40 two-rank launches whose ranks had built a torch optimizer
    (which imports torch._dynamo, and so slows the exit), none with a barrier first. The barrier is a
    counter in the launch's key-value store, not a collective, so that it cannot be matched against a
    collective that another rank is still inside; a rank ending on an exception skips it, and no rank
    waits more than ``_EXIT["wait_s"]`` seconds for the others."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    world = dist.get_world_size()
    store = dist.distributed_c10d._get_default_store() if world > 1 and not _EXIT["failed"] else None
    _all_at(store, "exiting", world)  # every rank is done with the group ...
    try:
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - nothing to report at exit
        pass
    _all_at(store, "closed", world)  # ... and has closed it before any process ends and drops its sockets


def _all_at(store, stage: str, world: int) -> None:
    """Wait until all ``world`` ranks have reached ``stage``: a counter in the launch's store (None: no
    wait), at most ``_EXIT["wait_s"]`` seconds."""
    if store is None:
        return
    try:
        if store.add(f"crowdzoo/{stage}", 1) == world:
            store.set(f"crowdzoo/all-{stage}", "1")
        store.wait([f"crowdzoo/all-{stage}"], datetime.timedelta(seconds=_EXIT["wait_s"]))
    except Exception:  # noqa: BLE001 - a rank that never came: time out and go on
        pass
