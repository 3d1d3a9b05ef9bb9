"""Island compute utilisation: the share of a round's wall time an island spends computing.

An island computes from its ``round_start`` event (start model fetched, samples
loaded) to its ``uploaded`` event (H steps trained, update built and uploaded); the
miner writes both as JSON lines with a Unix timestamp. A round lasts from its
opening beacon round to the opening of the next one (for the last round: until the
devnet saw it final). Utilisation is the mean compute time over islands divided by
the round's wall time; the rest is waiting for commits, audits and the merge.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any


def compute_seconds(lines: Iterable[str]) -> dict[int, float]:
    """Seconds of compute per round from one miner's JSON event lines (others ignored)."""
    starts: dict[int, float] = {}
    out: dict[int, float] = {}
    for line in lines:
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("round"), int):
            continue
        ts = doc.get("ts")
        if not isinstance(ts, int | float):
            continue
        if doc.get("event") == "round_start":
            starts[doc["round"]] = float(ts)
        elif doc.get("event") == "uploaded" and doc["round"] in starts:
            out[doc["round"]] = float(ts) - starts[doc["round"]]
    return out


def round_walls(rounds: list[dict[str, Any]], finished_at: Mapping[int, float]) -> dict[int, float]:
    """Wall seconds per final round: open to next open, or open to when it was seen final."""
    opens = {r["round"]: float(r["started_unix"]) for r in rounds}
    out: dict[int, float] = {}
    for r in rounds:
        index = r["round"]
        end = opens.get(index + 1, finished_at.get(index))
        if r["phase"] == "final" and end is not None and end > opens[index]:
            out[index] = end - opens[index]
    return out


def utilisation(
    walls: Mapping[int, float], compute: Mapping[str, Mapping[int, float]]
) -> dict[str, Any]:
    """Per round and overall: mean island compute seconds, wall seconds and their ratio."""
    per_round = []
    for index, wall in sorted(walls.items()):
        seconds = [c[index] for c in compute.values() if index in c]
        if not seconds:
            continue
        mean = sum(seconds) / len(seconds)
        per_round.append(
            {
                "round": index,
                "wall_s": round(wall, 2),
                "compute_s": round(mean, 2),
                "utilisation": round(mean / wall, 4),
            }
        )
    wall_total = sum(r["wall_s"] for r in per_round)
    compute_total = sum(r["compute_s"] for r in per_round)
    return {
        "per_round": per_round,
        "mean": round(compute_total / wall_total, 4) if wall_total else None,
        "compute_s": round(compute_total / len(per_round), 2) if per_round else None,
        "wall_s": round(wall_total / len(per_round), 2) if per_round else None,
    }
