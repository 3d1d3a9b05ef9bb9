"""One process of a reduction test: ``python -m tests.trainer.reduction_case STORE RANK WORLD OUT``.

Each process holds two data-parallel ranks' random gradients (seeded by rank); it
reduces them with the reduce-scatter over equal and over uneven shards, and rank 0
writes the SHA-256 of each result (and of its own shard) to ``OUT``, with the bytes each
reduce-scatter's buffers received.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from hypertrain.trainer.reduction import ScatterFold, even_bounds, shard_bounds

NUMEL, PER_PROCESS = 1001, 2


def rank_rows(rank: int) -> torch.Tensor:
    """The ``(PER_PROCESS, NUMEL)`` gradients of this process's ranks."""
    g = torch.Generator().manual_seed(rank)
    return (
        torch.randn(PER_PROCESS, NUMEL, generator=g) * (10.0 ** torch.arange(PER_PROCESS))[:, None]
    )


def uneven(world: int) -> list[range]:
    """Shards at made-up parameter cuts: process p owns p + 1 parameters of growing size."""
    owners = [p for p in range(world) for _ in range(p + 1)]
    sizes = [1] * (len(owners) - 1)
    return shard_bounds(owners, [*sizes, NUMEL - sum(sizes)], world)


def digest(t: torch.Tensor) -> str:
    return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()


def main(store: str, rank: int, world: int, out: Path) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    rows, count = rank_rows(rank), world * PER_PROCESS
    even, odd = ScatterFold(even_bounds(NUMEL, world)), ScatterFold(uneven(world))
    doc = {
        "even": digest(even(rows, count)),
        "uneven": digest(odd(rows, count)),
        "shard": digest(ScatterFold(even_bounds(NUMEL, world)).shard(rows, count)),
        "received": even.received,
    }
    dist.destroy_process_group()
    if rank == 0:
        out.write_text(json.dumps(doc))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
