"""An island's own events per round (JSON lines the miner writes with a Unix ``ts``), the
island half of the utilisation report (:mod:`hypertrain.devnet.utilisation`).

An island computes from a ``round_start`` event to its ``uploaded`` event. Under
overlapped rounds it may also have trained the round ahead of its open (``round_start``
with ``ahead``, then ``trained``): when the opened round adopted that work (``adopted``),
those steps are compute too, and the time from them to the open is a wait.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RoundMarks:
    """One island's events of one round it started (Unix seconds; None: not seen)."""

    start: float  # the first round_start (trained ahead: the ahead one)
    compute_start: float  # the round_start the upload followed (later after a restart)
    uploaded: float | None
    seen: float | None  # the first round_seen (trained ahead: when it could start)
    fetch: float | None
    ahead: tuple[float, float] | None = None  # adopted steps trained ahead: start, end
    opened_seen: float | None = None  # trained ahead: the round_seen after the open
    started_ahead: bool = False  # its first round_start was ahead of the round's open

    @property
    def compute_s(self) -> float | None:
        """Seconds of compute of a round with an upload (None: no upload)."""
        if self.uploaded is None:
            return None
        extra = 0.0 if self.ahead is None else self.ahead[1] - self.ahead[0]
        return self.uploaded - self.compute_start + extra


def events(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON event lines with an integer round and a numeric ts (others ignored)."""
    for line in lines:
        try:
            doc = json.loads(line) if line.startswith("{") else None
        except ValueError:
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("round"), int):
            continue
        if isinstance(doc.get("ts"), int | float):
            yield doc


def _note(m: dict[str, float], doc: dict[str, Any]) -> None:
    """One event into its round's marks."""
    ts, event, ahead = float(doc["ts"]), doc.get("event"), bool(doc.get("ahead"))
    if event == "round_start":
        m.setdefault("start", ts)
        m.setdefault("first_ahead", float(ahead))
        key = "ahead_start" if ahead else "latest_start"
        m[key], m["in_ahead"] = ts, float(ahead)
    elif event == "trained" and m.get("in_ahead"):
        m["ahead_end"], m["in_ahead"] = ts, 0.0
    elif event == "adopted":
        m["adopted"] = 1.0
    elif event == "uploaded" and "latest_start" in m:
        m["compute_start"], m["uploaded"] = m["latest_start"], ts
    elif event == "round_seen":
        m.setdefault("round_seen", ts)
        if not ahead and "ahead_start" in m:
            m.setdefault("opened_seen", ts)
    elif event == "start_model_fetch":
        m.setdefault("start_model_fetch", ts)


def island_rounds(lines: Iterable[str]) -> dict[int, RoundMarks]:
    """Per round the island started: its events, from one miner's JSON lines."""
    marks: dict[int, dict[str, float]] = {}
    for doc in events(lines):
        _note(marks.setdefault(doc["round"], {}), doc)
    out = {}
    for index, m in sorted(marks.items()):
        if "start" not in m:
            continue
        latest = m.get("latest_start", m.get("ahead_start", m["start"]))
        adopted = m.get("adopted") and "ahead_end" in m and "uploaded" in m
        out[index] = RoundMarks(
            start=m["start"],
            compute_start=m.get("compute_start", latest),
            uploaded=m.get("uploaded"),
            seen=m.get("round_seen"),
            fetch=m.get("start_model_fetch"),
            ahead=(m["ahead_start"], m["ahead_end"]) if adopted else None,
            opened_seen=m.get("opened_seen") if "ahead_start" in m else None,
            started_ahead=bool(m["first_ahead"]),
        )
    return out


def compute_seconds(lines: Iterable[str]) -> dict[int, float]:
    """Seconds of compute per round from one miner's JSON event lines (others ignored)."""
    return {index: s for index, m in island_rounds(lines).items() if (s := m.compute_s) is not None}
