"""The memory proof's workload: a seeded table the size of the claim and walks across it.

Table (``rows × lanes`` int64, :func:`hypertrain.protocol.memproof.table_shape`): row 0
is ``mix(seed + lane · φ)``; row ``k`` is, per lane, ``mix(prev ^ T[j, l] + k)`` where
``prev`` is the lane's entry in row ``k − 1`` and ``(j < k, l)`` a position read from
``prev``'s bits: every entry depends on its predecessor and on a data-dependent earlier
entry anywhere in the table, so it cannot be computed on demand from the seed. Answers:
``QUERIES × WALKERS_PER_QUERY`` walks of ``STEPS`` data-dependent reads over the whole
table; query ``q``'s answer is a tagged hash of its walkers' final states. A worker
rebuilds the table and recomputes only the sampled queries' walks.

Only integer arithmetic (wrapping int64 multiply, xor, masked shifts): the bytes are
identical on every device, so a CPU worker checks a GPU island's answers.
"""

from __future__ import annotations

from typing import Final

import torch

from hypertrain.protocol.domains import MEMPROOF, tagged_hasher
from hypertrain.protocol.memproof import (
    ANSWER_HEX,
    QUERIES,
    STEPS,
    WALKERS_PER_QUERY,
    device_seed,
    table_shape,
)

_M1: Final = 0xBF58476D1CE4E5B9 - (1 << 64)  # splitmix64 finalizer constants, as int64
_M2: Final = 0x94D049BB133111EB - (1 << 64)
_PHI: Final = 0x9E3779B97F4A7C15 - (1 << 64)
_WALK: Final = 0x5851F42D4C957F2D  # separates the walkers' start from the table's row 0


def _srl(x: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 (torch's ``>>`` is arithmetic)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def mix(z: torch.Tensor) -> torch.Tensor:
    """splitmix64's finalizer, elementwise on int64 (multiplication wraps)."""
    z = (z ^ _srl(z, 30)) * _M1
    z = (z ^ _srl(z, 27)) * _M2
    return z ^ _srl(z, 31)


def build_table(seed: int, claim_bytes: int, device: torch.device) -> torch.Tensor:
    """The claim's table on ``device``: (rows, lanes) int64, flattened row-major."""
    shape = table_shape(claim_bytes)
    table = torch.empty(shape.rows, shape.lanes, dtype=torch.int64, device=device)
    lanes = torch.arange(shape.lanes, dtype=torch.int64, device=device)
    table[0] = mix(lanes * _PHI + seed)
    flat = table.view(-1)
    for k in range(1, shape.rows):
        prev = table[k - 1]
        row = _srl(prev, 1) % k  # an earlier row, chosen by the data
        lane = _srl(mix(prev), 1) % shape.lanes  # any lane of it
        table[k] = mix((prev ^ flat[row * shape.lanes + lane]) + k)
    return flat


def walk(flat: torch.Tensor, seed: int, queries: list[int]) -> list[str]:
    """The answers of ``queries`` over a built table, in the given order."""
    ids = torch.tensor(
        [q * WALKERS_PER_QUERY + w for q in queries for w in range(WALKERS_PER_QUERY)],
        dtype=torch.int64,
        device=flat.device,
    )
    x = mix(ids * _PHI + (seed ^ _WALK))
    size = flat.numel()
    for step in range(STEPS):
        x = mix((x ^ flat[_srl(x, 1) % size]) + step)
    ends = x.cpu().view(len(queries), WALKERS_PER_QUERY)
    out = []
    for q, row in zip(queries, ends, strict=True):
        hasher = tagged_hasher(MEMPROOF)
        hasher.update(f"answer:{seed}:{q}:".encode())
        hasher.update(row.numpy().astype("<i8").tobytes())
        out.append(hasher.hexdigest()[:ANSWER_HEX])
    return out


def device_answers(seed: int, index: int, claim_bytes: int, device: torch.device) -> list[str]:
    """Device ``index``'s ``QUERIES`` answers for a challenge seed: build, walk, drop."""
    own = device_seed(seed, index)
    flat = build_table(own, claim_bytes, device)
    try:
        return walk(flat, own, list(range(QUERIES)))
    finally:
        del flat


def check_answers(
    seed: int, index: int, claim_bytes: int, queries: list[int], device: torch.device
) -> list[str]:
    """What a worker recomputes: the sampled ``queries`` of device ``index`` only."""
    own = device_seed(seed, index)
    return walk(build_table(own, claim_bytes, device), own, queries)
