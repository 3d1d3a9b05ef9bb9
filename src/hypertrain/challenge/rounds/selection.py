"""Audit selection: which islands and which segments are replayed, from public data only.

Anyone can recompute a round's selection from the run id, the round number, the
drand round that selected it (the first beacon round strictly after the commit
deadline), that round's randomness, and the committed hotkeys with their
probation flags. The formula (docs/mechanism.md, "Audit selection"):

    seed        = H_sel(JCS({"run_id", "round", "beacon_round", "randomness"}))
    draw(label) = first 8 bytes (big-endian) of H_sel(seed || label)
    island h audited  <=>  probation(h)  or  draw("island:" + h) < floor(q * 2**64)
    segments(h) = k distinct indices from 0..S-2 by a Fisher-Yates shuffle driven by
                  draw("segment:" + h + ":" + i) with rejection sampling,
                  plus S-1 (the final segment) always; sorted ascending

where ``H_sel`` is the tagged hash under ``AUDIT_SELECTION``, q the audit rate,
k the number of random segments and S = H / J the segments per island. The
randomness is unknown until after every commit is fixed, so a miner cannot
choose which segments to fake. The data-assignment key published at round open
is :mod:`hypertrain.protocol.round_key`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from math import comb

from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.domains import AUDIT_SELECTION, tagged_hash
from hypertrain.protocol.round_key import assignment_key as assignment_key

_TWO_64 = 1 << 64


@dataclass(frozen=True, slots=True)
class IslandAudit:
    """One selected island and the segment indices its auditor replays."""

    hotkey: str
    segments: tuple[int, ...]
    probation: bool


def selection_seed(run_id: str, round_index: int, beacon_round: int, randomness_hex: str) -> bytes:
    doc = {
        "run_id": run_id,
        "round": round_index,
        "beacon_round": beacon_round,
        "randomness": randomness_hex,
    }
    return tagged_hash(AUDIT_SELECTION, canonical_bytes(doc))


def draw_u64(seed: bytes, label: str) -> int:
    """A uniform 64-bit integer derived from the seed and a label."""
    return int.from_bytes(tagged_hash(AUDIT_SELECTION, seed + label.encode("utf-8"))[:8], "big")


def rate_threshold(rate: float) -> int:
    """floor(rate * 2**64): an island is audited when its draw is below it."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"audit rate {rate} is outside [0, 1]")
    return int(rate * _TWO_64)  # exact: scaling by a power of two


def _uniform_below(seed: bytes, label: str, bound: int) -> int:
    """An unbiased integer in [0, bound) by rejection sampling over 64-bit draws."""
    limit = _TWO_64 - (_TWO_64 % bound)
    attempt = 0
    while True:
        value = draw_u64(seed, f"{label}:{attempt}")
        if value < limit:
            return value % bound
        attempt += 1


def pick_segments(seed: bytes, hotkey: str, num_segments: int, k: int) -> tuple[int, ...]:
    """k distinct random segments among the non-final ones, plus the final one."""
    if num_segments < 1:
        raise ValueError("an island has at least one segment")
    pool = list(range(num_segments - 1))
    take = min(k, len(pool))
    for i in range(take):  # partial Fisher-Yates: pool[:take] is the sample
        j = i + _uniform_below(seed, f"segment:{hotkey}:{i}", len(pool) - i)
        pool[i], pool[j] = pool[j], pool[i]
    return tuple(sorted([*pool[:take], num_segments - 1]))


def select_audits(
    *,
    run_id: str,
    round_index: int,
    beacon_round: int,
    randomness_hex: str,
    committed: Mapping[str, bool],
    rate: float,
    segments_per_audit: int,
    num_segments: int,
) -> list[IslandAudit]:
    """Audits for one round; ``committed`` maps each committed hotkey to its probation flag."""
    seed = selection_seed(run_id, round_index, beacon_round, randomness_hex)
    threshold = rate_threshold(rate)
    out = []
    for hotkey in sorted(committed):
        probation = committed[hotkey]
        if probation or draw_u64(seed, f"island:{hotkey}") < threshold:
            segments = pick_segments(seed, hotkey, num_segments, segments_per_audit)
            out.append(IslandAudit(hotkey, segments, probation))
    return out


def catch_probability(
    *, rate: float, segments_per_audit: int, num_segments: int, faked: int, final_faked: bool
) -> float:
    """Chance one round's selection replays at least one of ``faked`` faked segments.

    ``final_faked`` says whether the final segment is among them (then any audit of
    the island catches it). Otherwise the ``faked`` segments lie among the S-1
    non-final ones, of which k are drawn without replacement.
    """
    if final_faked:
        return rate
    pool = num_segments - 1
    k = min(segments_per_audit, pool)
    if faked <= 0 or pool <= 0:
        return 0.0
    miss = comb(pool - faked, k) / comb(pool, k)
    return rate * (1.0 - miss)
