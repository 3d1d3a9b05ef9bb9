"""The memory proof's workload: a seeded table the size of the claim and walks across it.

Table (``rows × lanes`` int64, :func:`hypertrain.protocol.memproof.table_shape`): row 0
is ``mix(seed + lane · φ)``; row ``k`` is, per lane, ``mix(prev ^ T[j, l] + k)`` where
``prev`` is the lane's entry in row ``k − 1`` and ``(j < k, l)`` a position read from
``prev``'s bits: every entry depends on its predecessor and on a data-dependent earlier
entry anywhere in the table, so it cannot be computed on demand from the seed. Answers:
``QUERIES × WALKERS_PER_QUERY`` walks of ``STEPS`` data-dependent reads over the whole
table (the ladder's answers over a prefix of its rows,
:func:`hypertrain.protocol.memproof.prefix_rows`); query ``q``'s answer is a tagged hash
of its walkers' final states. A worker builds the table row by row only as far as the
sampled queries need, checks each rung as soon as its prefix is built, and stops at the
first answer that differs (:func:`check_device`): its work is counted in entries built.

Only integer arithmetic (wrapping int64 multiply, xor, masked shifts): the bytes are
identical on every device, so a CPU worker checks a GPU island's answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import torch

from hypertrain.protocol.domains import MEMPROOF, tagged_hasher
from hypertrain.protocol.memproof import (
    ANSWER_HEX,
    QUERIES,
    STEPS,
    WALKERS_PER_QUERY,
    TableShape,
    device_seed,
    prefix_rows,
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


class TableBuilder:
    """A claim's table built row by row, as far as asked (a prefix is built alone: row
    ``k`` reads only rows below ``k``); ``entries_built`` counts the work done."""

    def __init__(self, seed: int, claim_bytes: int, device: torch.device) -> None:
        self.seed = seed
        self.shape = table_shape(claim_bytes)
        self.device = device
        self.rows_built = 0
        self.entries_built = 0
        self._table = torch.empty(0, self.shape.lanes, dtype=torch.int64, device=device)

    @property
    def flat(self) -> torch.Tensor:
        """The rows built so far, flattened row-major."""
        return self._table[: self.rows_built].reshape(-1)

    def extend(self, rows: int) -> torch.Tensor:
        """Build up to ``rows`` rows (allocating only those) and return them flattened."""
        rows = min(rows, self.shape.rows)
        if rows <= self.rows_built:
            return self.flat
        if rows > self._table.shape[0]:
            grown = torch.empty(rows, self.shape.lanes, dtype=torch.int64, device=self.device)
            grown[: self.rows_built] = self._table[: self.rows_built]
            self._table = grown
        _build_rows(self._table, self.seed, self.rows_built, rows)
        self.entries_built += (rows - self.rows_built) * self.shape.lanes
        self.rows_built = rows
        return self.flat


def _build_rows(table: torch.Tensor, seed: int, start: int, stop: int) -> None:
    """Rows ``start .. stop - 1`` of ``table`` (rows below ``start`` already built)."""
    lanes_n = table.shape[1]
    flat = table.view(-1)
    if start == 0:
        lanes = torch.arange(lanes_n, dtype=torch.int64, device=table.device)
        table[0] = mix(lanes * _PHI + seed)
        start = 1
    for k in range(start, stop):
        prev = table[k - 1]
        row = _srl(prev, 1) % k  # an earlier row, chosen by the data
        lane = _srl(mix(prev), 1) % lanes_n  # any lane of it
        table[k] = mix((prev ^ flat[row * lanes_n + lane]) + k)


def build_table(seed: int, claim_bytes: int, device: torch.device) -> torch.Tensor:
    """The claim's whole table on ``device``: (rows, lanes) int64, flattened row-major."""
    builder = TableBuilder(seed, claim_bytes, device)
    return builder.extend(builder.shape.rows)


def walk(flat: torch.Tensor, seed: int, queries: list[int], shape: TableShape) -> list[str]:
    """The answers of ``queries`` over a table of ``shape`` (built at least as far as the
    queries' prefixes), in the given order."""
    ids = torch.tensor(
        [q * WALKERS_PER_QUERY + w for q in queries for w in range(WALKERS_PER_QUERY)],
        dtype=torch.int64,
        device=flat.device,
    )
    sizes = torch.tensor(
        [prefix_rows(shape, q) * shape.lanes for q in queries for _ in range(WALKERS_PER_QUERY)],
        dtype=torch.int64,
        device=flat.device,
    )
    if int(sizes.max()) > flat.numel():
        raise ValueError("the table is not built as far as these queries read")
    x = mix(ids * _PHI + (seed ^ _WALK))
    for step in range(STEPS):
        x = mix((x ^ flat[_srl(x, 1) % sizes]) + step)
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
    shape = table_shape(claim_bytes)
    flat = build_table(own, claim_bytes, device)
    try:
        return walk(flat, own, list(range(QUERIES)), shape)
    finally:
        del flat


@dataclass(frozen=True, slots=True)
class DeviceCheck:
    """A worker's check of one device: the recomputed answers by query (as far as it got),
    the first query whose answer differs from the island's (None: none did), and the
    entries it built."""

    answers: dict[int, str]
    wrong_query: int | None
    entries_built: int


class CheckBudgetError(ValueError):
    """The check of a claim would build more entries than the worker's budget allows."""


def check_device(
    seed: int,
    index: int,
    claim_bytes: int,
    expected: dict[int, str],
    device: torch.device,
    max_entries: int,
) -> DeviceCheck:
    """Recompute device ``index``'s answers to the queries of ``expected`` (the island's
    answers), cheapest prefix first, building the table only as far as each needs; stop
    at the first answer that differs. Refuses (:class:`CheckBudgetError`) before building
    anything when the queries need more than ``max_entries`` entries."""
    own = device_seed(seed, index)
    builder = TableBuilder(own, claim_bytes, device)
    order = sorted(expected, key=lambda q: (prefix_rows(builder.shape, q), q))
    need = max((prefix_rows(builder.shape, q) for q in order), default=0) * builder.shape.lanes
    if need > max_entries:
        raise CheckBudgetError(f"checking device {index} builds {need} entries (> {max_entries})")
    answers: dict[int, str] = {}
    for query in order:
        flat = builder.extend(prefix_rows(builder.shape, query))
        (answer,) = walk(flat, own, [query], builder.shape)
        answers[query] = answer
        if answer != expected[query]:
            return DeviceCheck(answers, query, builder.entries_built)
    return DeviceCheck(answers, None, builder.entries_built)


def check_answers(
    seed: int, index: int, claim_bytes: int, queries: list[int], device: torch.device
) -> list[str]:
    """What a worker recomputes for the sampled ``queries`` of device ``index`` (all of
    them, in the given order; the table built as far as they need)."""
    own = device_seed(seed, index)
    builder = TableBuilder(own, claim_bytes, device)
    flat = builder.extend(max(prefix_rows(builder.shape, q) for q in queries))
    return walk(flat, own, queries, builder.shape)
