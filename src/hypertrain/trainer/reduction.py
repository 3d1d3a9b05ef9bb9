"""The fixed-order reduce-scatter of a data-parallel island's gradients.

Process ``p`` holds the flat gradients of its ``k`` data-parallel ranks, a ``(k, N)``
tensor. The flat gradient is cut into ``W`` contiguous shards: equal ones
(:func:`even_bounds`), or under ZeRO-1 its cuts at parameter boundaries
(:func:`shard_owners`; shard ``q`` is the parameters process ``q`` owns and
updates). One all-to-all sends every process's rows of shard ``q`` to process ``q``,
which then holds all ``R = W·k`` rows of its shard, in rank order, and folds them left to
right and divides by ``R·M``: per element exactly the additions and the division of the
one-process emulation (``step.reduce_gradients``), so the bytes are the same: both, and
the expert owners' sum under expert parallelism, are the one :func:`fold`. Without
ZeRO-1 every process needs the whole mean, and a second all-to-all gathers the reduced
shards; with ZeRO-1 an owner needs only its own shard.

Per process, the reduction receives ``W·k·|shard|`` elements and then ``N``: ``2·N`` in
all for ``k = 1`` and equal shards (ZeRO-1: ``W·|shard|``, about ``N``), against the
``W·k·N`` of all-gathering every rank's full gradient, and never a buffer of ``W`` full
gradients.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import Tensor

from hypertrain.trainer.errors import TrainerError


def fold(first: Tensor, rest: Iterable[Tensor], count: int) -> Tensor:
    """The island's one reduction: ``first`` plus each of ``rest`` in rank order, left to
    right (never a tree or a library's order), then divided by ``count`` micro-batches.
    Accumulates into (and returns) ``first``: callers hand over a fresh tensor."""
    for row in rest:
        first.add_(row)
    return first.div_(count)


def shard_owners(model_shapes: Sequence[tuple[str, tuple[int, ...]]], world: int) -> dict[str, int]:
    """Owner process of each parameter: contiguous runs in canonical order, cut where the
    running element count passes ``(p+1)/W`` of the total."""
    sizes = [(name, max(1, math.prod(shape))) for name, shape in model_shapes]
    total, running, owners = sum(n for _, n in sizes), 0, {}
    for name, n in sizes:
        owners[name] = min(world - 1, running * world // total)
        running += n
    return owners


def shard_bounds(owners: Sequence[int], sizes: Sequence[int], world: int) -> list[range]:
    """Element range of each process's shard: the parameters it owns, which must be
    contiguous in canonical order (``owners`` and ``sizes`` are per parameter, in order)."""
    if any(b < a for a, b in itertools.pairwise(owners)):
        raise TrainerError("shard owners must be contiguous in canonical order")
    bounds, offset = [], 0
    for p in range(world):
        size = sum(n for owner, n in zip(owners, sizes, strict=True) if owner == p)
        bounds.append(range(offset, offset + size))
        offset += size
    return bounds


def even_bounds(total: int, world: int) -> list[range]:
    """``total`` elements cut into ``world`` contiguous shards whose sizes differ by at most one."""
    base, extra = divmod(total, world)
    bounds, offset = [], 0
    for p in range(world):
        size = base + (1 if p < extra else 0)
        bounds.append(range(offset, offset + size))
        offset += size
    return bounds


@dataclass
class ScatterFold:
    """The reduce-scatter over ``bounds`` (one range per process); counts what it moves."""

    bounds: list[range]
    received: int = field(default=0)  # elements received, own rows included, since creation

    def shard(self, flat: Tensor, count: int) -> Tensor:
        """This process's shard of the island's mean gradient (collective)."""
        rank, world = dist.get_rank(), dist.get_world_size()
        k, mine = flat.shape[0], self.bounds[rank]
        send = (
            flat.reshape(-1)  # one rank per process: its row is already in shard order
            if k == 1
            else torch.cat([flat[:, b.start : b.stop].reshape(-1) for b in self.bounds])
        )
        recv = flat.new_empty(world * k * len(mine))
        dist.all_to_all_single(
            recv, send, [k * len(mine)] * world, [k * len(b) for b in self.bounds]
        )
        self.received += recv.numel()
        rows = recv.view(world * k, len(mine))  # process-major, then its ranks: rank order
        return fold(rows[0].clone(), rows[1:], count)

    def gather(self, shard: Tensor) -> Tensor:
        """Every process's reduced shard, in place in the whole mean (collective: each
        owner broadcasts its shard straight into the output)."""
        rank = dist.get_rank()
        out = shard.new_empty(self.bounds[-1].stop)
        for q, b in enumerate(self.bounds):
            if not len(b):
                continue
            part = out[b.start : b.stop]
            if q == rank:
                part.copy_(shard)
            dist.broadcast(part, src=q)
        self.received += out.numel()
        return out

    def __call__(self, flat: Tensor, count: int) -> Tensor:
        """The whole mean gradient, on every process."""
        return self.gather(self.shard(flat, count))
