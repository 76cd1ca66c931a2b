"""Data-parallel natural-gradient steps on ``torch.distributed``: labels spread over processes.

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

import contextlib
import warnings
from dataclasses import dataclass

import torch

from ..errors import DataError, DistributedError
from ..process_group import rank_and_world, timeout_seconds


@dataclass(frozen=True)
class Shard:
    """Labels [lo, hi) of ``n_labels`` live on this ``rank`` of ``world`` ranks; this process's data
    hold labels from global position ``offset`` on (0 when it holds them all, ``lo`` when it read only
    its shard, :meth:`crowdzoo.PairwiseData.read_shard`)."""

    rank: int
    world: int
    lo: int
    hi: int
    n_labels: int = -1
    offset: int = 0

    @property
    def lead(self) -> bool:
        """Whether this rank writes (progress, checkpoints): rank 0."""
        return self.rank == 0

    @contextlib.contextmanager
    def quiet(self):
        """A context in which the ranks other than 0 issue no warnings (rank 0 speaks for the fit)."""
        with warnings.catch_warnings():
            if not self.lead:
                warnings.simplefilter("ignore")
            yield

    def local(self, idx: torch.Tensor) -> torch.Tensor:
        """Positions in this shard of the global label indices ``idx`` that it holds (with repeats)."""
        if self.world == 1:
            return idx
        keep = (idx >= self.lo) & (idx < self.hi)
        return idx[keep] - self.lo

    def union(self, values: torch.Tensor) -> torch.Tensor:
        """The sorted distinct values (long) that any rank holds in ``values``: two all-gathers (the
        sizes, then the values padded to the largest)."""
        local = torch.unique(values)
        if self.world == 1:
            return local
        import torch.distributed as dist

        try:
            sizes = [torch.zeros(1, dtype=torch.long) for _ in range(self.world)]
            dist.all_gather(sizes, torch.tensor([local.numel()]))
            pad = torch.full((int(max(sizes)),), -1, dtype=torch.long)
            pad[:local.numel()] = local
            parts = [torch.empty_like(pad) for _ in range(self.world)]
            dist.all_gather(parts, pad)
        except RuntimeError as err:
            raise DistributedError(f"rank {self.rank} of {self.world}: gathering a step's users across ranks "
                                   f"failed ({str(err).splitlines()[0]}); another rank stopped or did not "
                                   f"answer within {timeout_seconds():g} s (CROWDZOO_DISTRIBUTED_TIMEOUT)"
                                   ) from None
        every = torch.cat(parts)
        return torch.unique(every[every >= 0])

    def tie_share(self, y: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
        """The share of ties (y = ½) among every rank's labels, this rank's ``y``, each label counted by
        its weight ``w`` (None: by 1)."""
        if w is None:
            return self.sum((y == 0.5).sum().to(torch.float64)) / self.n_labels
        return self.sum((w * (y == 0.5)).sum()) / self.sum(w.sum())

    def sum(self, *tensors):
        """The sums over ranks of ``tensors`` (each rank's share of a sum over labels)."""
        if self.world == 1:
            return tensors if len(tensors) > 1 else tensors[0]
        import torch.distributed as dist

        out = self._packed(tensors, dist.all_reduce, "summing a step's statistics across ranks")
        return out if len(out) > 1 else out[0]

    def sum_grads(self, params, *tensors):
        """Sum the gradients of ``params`` (in place; a missing gradient counts as zeros) and
        ``tensors`` over ranks in one all-reduce (:meth:`sum`), and return the sums of ``tensors``:
        each rank's gradient and statistics of its share of a step's rows."""
        if self.world == 1:
            return tensors
        params = [p for p in params if p.requires_grad]
        grads = [torch.zeros_like(p) if p.grad is None else p.grad for p in params]
        out = self.sum(*grads, *tensors)
        out = out if isinstance(out, tuple) else (out,)
        for p, g in zip(params, out[:len(params)]):
            p.grad = g
        return out[len(params):]

    def broadcast(self, *tensors):
        """Rank 0's ``tensors`` on every rank (one broadcast): a value computed on every rank that must
        be bit-identical everywhere."""
        if self.world == 1:
            return tensors
        import torch.distributed as dist

        return self._packed(tensors, lambda buf: dist.broadcast(buf, 0), "broadcasting rank 0's values")

    def _packed(self, tensors, collective, what: str) -> tuple:
        """``collective`` (in place) on ``tensors`` packed into one float64 buffer (one message per
        call), unpacked to their shapes and dtypes; a DistributedError naming ``what`` if it fails."""
        flat = [torch.as_tensor(t) for t in tensors]
        buf = torch.cat([t.reshape(-1).to(torch.float64) for t in flat])
        try:
            collective(buf)
        except RuntimeError as err:
            raise DistributedError(
                f"rank {self.rank} of {self.world}: {what} failed ({str(err).splitlines()[0]}). Another "
                f"rank stopped or did not answer within {timeout_seconds():g} s "
                "(CROWDZOO_DISTRIBUTED_TIMEOUT); its own error says why") from None
        out, at = [], 0
        for t in flat:
            out.append(buf[at:at + t.numel()].reshape(t.shape).to(t.dtype))
            at += t.numel()
        return tuple(out)

    def agree(self, values, what: str) -> None:
        """A DataError on every rank unless every rank passed the same ``values`` (floats; one
        all-gather): a check that data or settings meant to be replicated are."""
        mine = torch.as_tensor(values, dtype=torch.float64).reshape(-1)
        if self.world == 1:
            return
        import torch.distributed as dist

        got = [torch.empty_like(mine) for _ in range(self.world)]
        try:
            dist.all_gather(got, mine)
        except RuntimeError as err:
            raise DistributedError(f"rank {self.rank} of {self.world}: comparing {what} across ranks failed "
                                   f"({str(err).splitlines()[0]}); another rank stopped or did not answer "
                                   f"within {timeout_seconds():g} s (CROWDZOO_DISTRIBUTED_TIMEOUT)") from None
        for r, v in enumerate(got):
            if not torch.equal(v, got[0]):
                raise DataError(f"distributed: rank {r} has other {what} than rank 0 ({v.tolist()} vs "
                                f"{got[0].tolist()}); give every rank the same data and settings",
                                arg="distributed")


def bounds(n_labels: int, rank: int, world: int) -> tuple[int, int]:
    """[lo, hi): the contiguous share of ``n_labels`` labels that rank ``rank`` of ``world`` holds."""
    return n_labels * rank // world, n_labels * (rank + 1) // world


def replicated(n_items: int, distributed: bool) -> Shard:
    """A :class:`Shard` over ``n_items`` rows that every rank holds whole (BayesSCDC's observations: each
    step's uniform rows are split across the ranks, not the table; its annotations are sharded, see
    :mod:`crowdzoo.models.scdc.natgrad`): rank r of R when ``distributed``, else the one process."""
    if not distributed:
        return Shard(0, 1, 0, n_items, n_items, 0)
    rank, world = rank_and_world()
    return Shard(rank, world, 0, n_items, n_items, 0)


def shard(data, distributed: bool) -> Shard:
    """This process's shard of ``data``'s labels (a PairwiseData): every
    label when not ``distributed``; else a contiguous 1/R of them on rank r of R. Data that is already
    one rank's shard (:meth:`~crowdzoo.PairwiseData.read_shard`, its ``label_range`` set) is used as it
    is, after checking that it is this rank's."""
    held = getattr(data, "label_range", None)
    n_held = len(data.a)
    if not distributed:
        if held is not None and held[2] != n_held:
            raise DataError(f"data: holds labels {held[0]}..{held[1] - 1} of {held[2]} (one rank's shard, "
                            "from read_shard); fit it with {distributed=True} inside the torchrun launch, or "
                            "read the whole file", arg="data", settings=("distributed",))
        return Shard(0, 1, 0, n_held, n_held, 0)
    rank, world = rank_and_world()
    if held is None:
        lo, hi = bounds(n_held, rank, world)
        return Shard(rank, world, lo, hi, n_held, 0)
    lo, hi, P = held
    check_tiling(lo, hi, P, rank, world)
    return Shard(rank, world, lo, hi, P, lo)


def check_tiling(lo: int, hi: int, P: int, rank: int, world: int, what: str = "labels") -> None:
    """The ranks' shards, in rank order, must be ``what`` 0..P-1 exactly once (an all-gather)."""
    import torch.distributed as dist

    got = [torch.zeros(3, dtype=torch.long) for _ in range(world)]
    dist.all_gather(got, torch.tensor([lo, hi, P], dtype=torch.long))
    ranges = [tuple(int(v) for v in t) for t in got]
    end = 0
    for r, (lo_r, hi_r, P_r) in enumerate(ranges):
        if lo_r != end or P_r != P or hi_r < lo_r:
            raise DataError(f"data: the ranks' shards do not tile the {what} 0..{P - 1} in rank order (rank "
                            f"{r} holds [{lo_r}, {hi_r}) of {P_r} after [0, {end})); read every rank's "
                            "shard of the same file with read_shard inside one launch")
        end = hi_r
    if end != P:
        raise DataError(f"data: the ranks' shards cover {what} 0..{end - 1} of {P}")
