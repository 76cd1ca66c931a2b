"""Data-parallel natural-gradient steps on ``torch.distributed`` (issue 19).

Each rank holds a contiguous shard of the labels. The loop draws the same mini-batch indices on every
rank (the same seeded generator), each rank computes the natural-parameter increments of the labels of
that batch that it holds (Eq. 17 of Simpson & Gurevych 2020: sums over labels), and an all-reduce
sums them, so every rank takes the same step and the globals (q, q(s)) stay identical everywhere —
the single-process step on the same batch, up to the order of floating-point sums.

Launch with ``torchrun --nproc-per-node R script.py`` (one or many machines) and call
``crowdzoo.fit(..., distributed=True)`` in the script: the process group is initialised from
torchrun's environment (gloo backend, CPU tensors) unless the script has done it already. A rank that
fails or stops answering ends every other rank with a :class:`DistributedError` within the group's
timeout (``CROWDZOO_DISTRIBUTED_TIMEOUT`` seconds, default 300) instead of a hang.
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch

from ..errors import DistributedError


def timeout_seconds() -> float:
    return float(os.environ.get("CROWDZOO_DISTRIBUTED_TIMEOUT", "300"))


@dataclass(frozen=True)
class Shard:
    """Labels [lo, hi) of P live on this ``rank`` of ``world`` ranks."""

    rank: int
    world: int
    lo: int
    hi: int

    @property
    def lead(self) -> bool:
        """Whether this rank writes (progress, checkpoints): rank 0."""
        return self.rank == 0

    def local(self, idx: torch.Tensor) -> torch.Tensor:
        """Positions in this shard of the global label indices ``idx`` that it holds (with repeats)."""
        if self.world == 1:
            return idx
        keep = (idx >= self.lo) & (idx < self.hi)
        return idx[keep] - self.lo

    def sum(self, *tensors):
        """The sums over ranks of ``tensors`` (each rank's share of a sum over labels)."""
        if self.world == 1:
            return tensors if len(tensors) > 1 else tensors[0]
        import torch.distributed as dist

        out = []
        for t in tensors:
            t = torch.as_tensor(t).clone()
            try:
                dist.all_reduce(t)
            except RuntimeError as err:
                raise DistributedError(
                    f"rank {self.rank} of {self.world}: summing a step's statistics across ranks failed "
                    f"({str(err).splitlines()[0]}). Another rank stopped or did not answer within "
                    f"{timeout_seconds():g} s (CROWDZOO_DISTRIBUTED_TIMEOUT); its own error says why"
                ) from None
            out.append(t)
        return tuple(out) if len(out) > 1 else out[0]


def shard(n_labels: int, distributed: bool) -> Shard:
    """This process's shard: every label when not ``distributed``; else a contiguous 1/R of them on
    rank r of R, the process group initialised from torchrun's environment if it is not already."""
    if not distributed:
        return Shard(0, 1, 0, n_labels)
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
    rank, world = dist.get_rank(), dist.get_world_size()
    lo, hi = n_labels * rank // world, n_labels * (rank + 1) // world
    return Shard(rank, world, lo, hi)
