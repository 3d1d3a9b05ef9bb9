"""The memory proof's public arithmetic: table geometry, floors, seeds, the ladder, the sample.

An admission challenge proves each device's claimed memory (``DeviceReport.memory_bytes``)
with a table of that size that the device must hold while it answers (the workload is
``hypertrain.trainer.memproof``; docs/mechanism.md, "Memory proof"). Everything here is
integer arithmetic and tagged hashes, so the service (which never imports torch), the
island and the worker derive the same geometry, seeds and sample.

The ladder: the first ``len(LADDER_SHIFTS)`` answers of a device walk only a prefix of its
table (``rows >> shift`` rows, :func:`prefix_rows`), the rest walk all of it. A table's
rows depend only on earlier rows, so a prefix can be built alone; the worker checks the
rungs in ascending order while it builds, and stops at the first wrong one. Refusing an
island therefore costs the worker the smallest rung, or at most ``4 ×`` the largest
prefix the island answered right (docs/mechanism.md, "Memory proof").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.domains import MEMPROOF, tagged_hash
from hypertrain.protocol.manifest import LayoutSpec, RunManifest, param_count

ENTRY_BYTES: Final = 8  # one int64 per table entry
LANES: Final = 1024  # entries per row built at once; more for large claims (table_shape)
MAX_ROWS: Final = 1024  # rows per table before the lanes grow
QUERIES: Final = 16  # answers per device
WALKERS_PER_QUERY: Final = 64  # independent walks hashed into one answer
STEPS: Final = 64  # data-dependent table reads per walk
DEVICES_CHECKED: Final = 2  # devices a worker recomputes (all of them when fewer)
LADDER_SHIFTS: Final = (8, 6, 4, 2)  # answers 0..3 walk the first rows >> shift rows
FULL_CHECKED: Final = 4  # answers over the whole table a worker recomputes per device
QUERIES_CHECKED: Final = len(LADDER_SHIFTS) + FULL_CHECKED  # per checked device
MIN_PREFIX_ROWS: Final = 2  # the smallest rung (row 0 alone is a function of the seed)
MIN_CLAIM_BYTES: Final = 1 << 20  # the smallest table; also the miner's default claim
MAX_CLAIM_BYTES: Final = 1 << 40
ANSWER_HEX: Final = 32  # an answer is the first 16 bytes of a tagged hash, in hex


@dataclass(frozen=True, slots=True)
class TableShape:
    """A claim's table: ``rows × lanes`` int64 entries (``proven_bytes`` in all)."""

    rows: int
    lanes: int

    @property
    def entries(self) -> int:
        return self.rows * self.lanes

    @property
    def proven_bytes(self) -> int:
        return self.entries * ENTRY_BYTES


def table_shape(claim_bytes: int) -> TableShape:
    """The table a claim builds: lanes grow in steps of ``LANES`` so rows stay under
    ``MAX_ROWS``; the claim is rounded down to whole rows (never up)."""
    if not MIN_CLAIM_BYTES <= claim_bytes <= MAX_CLAIM_BYTES:
        raise ValueError(
            f"a memory claim is {MIN_CLAIM_BYTES} to {MAX_CLAIM_BYTES} bytes, not {claim_bytes}"
        )
    entries = claim_bytes // ENTRY_BYTES
    lanes = LANES * max(1, -(-entries // (LANES * MAX_ROWS)))
    return TableShape(rows=entries // lanes, lanes=lanes)


def prefix_rows(shape: TableShape, query: int) -> int:
    """The rows answer ``query`` walks: a rung of the ladder, or the whole table."""
    if not 0 <= query < QUERIES:
        raise ValueError(f"a query is 0 to {QUERIES - 1}, not {query}")
    if query >= len(LADDER_SHIFTS):
        return shape.rows
    return min(shape.rows, max(MIN_PREFIX_ROWS, shape.rows >> LADDER_SHIFTS[query]))


def memory_floor(manifest: RunManifest, layout: LayoutSpec) -> int:
    """Bytes each device must prove to be admitted with ``layout``: the float32 weights it
    holds (experts split over ``ep``), and at least the smallest table."""
    weights = 4 * param_count(manifest.model) // layout.ep
    return max(weights, MIN_CLAIM_BYTES)


def device_seed(seed: int, device: int) -> int:
    """A device's own table seed (63 bits), so one table cannot answer for two devices."""
    digest = tagged_hash(MEMPROOF, canonical_bytes({"seed": str(seed), "device": device}))
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


def check_sample(randomness: str, hotkey: str, devices: int) -> list[tuple[int, int]]:
    """The (device, query) pairs a worker recomputes, drawn from the beacon round after
    the answer arrived (so the island could not know them when it answered): per sampled
    device every rung of the ladder and ``FULL_CHECKED`` of the whole-table answers."""
    picked: list[tuple[int, int]] = []
    order = _shuffled(randomness, hotkey, "device", devices)
    rungs = len(LADDER_SHIFTS)
    for device in sorted(order[: min(DEVICES_CHECKED, devices)]):
        full = [
            rungs + q for q in _shuffled(randomness, hotkey, f"query:{device}", QUERIES - rungs)
        ]
        picked += [(device, q) for q in [*range(rungs), *sorted(full[:FULL_CHECKED])]]
    return picked


def _shuffled(randomness: str, hotkey: str, what: str, count: int) -> list[int]:
    """``range(count)`` in the order of a tagged hash of each index (a keyed shuffle)."""

    def key(i: int) -> bytes:
        doc = {"randomness": randomness, "hotkey": hotkey, "what": what, "i": i}
        return tagged_hash(MEMPROOF, canonical_bytes(doc))

    return sorted(range(count), key=key)


def claim_for(floor_bytes: int) -> int:
    """The smallest whole-MiB claim whose table proves at least ``floor_bytes`` (a table
    rounds its claim down to whole rows, so the floor rounded up to MiB may prove less)."""
    mib = 1 << 20
    claim = max(MIN_CLAIM_BYTES, -(-floor_bytes // mib) * mib)
    while table_shape(claim).proven_bytes < floor_bytes:
        claim += mib
    return claim
