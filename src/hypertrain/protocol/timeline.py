"""A span of time cut into named waits: the one rule every utilisation report uses.

The devnet's report (from the islands' own events, in Unix seconds) and the dashboard's
panel (from the service's records, in beacon rounds) both cut an island's time after its
work into causes at the boundaries they know, in the order the island meets them. A
boundary that was not recorded joins its cause to the next one (``audit+merge``), never
a silent zero, and every boundary is clamped to the span, so the pieces always add up to
the whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

N = TypeVar("N", int, float)


def fold(cursor: N, end: N, marks: Sequence[tuple[str, N | None]]) -> list[tuple[str, N]]:
    """Cut ``[cursor, end]`` at each mark in turn: ``(cause, length)`` pieces that sum to
    ``end - cursor``; a mark not recorded (``None``) joins its cause to the next one's."""
    out: list[tuple[str, N]] = []
    pending: list[str] = []
    for cause, t in marks:
        pending.append(cause)
        if t is None:
            continue
        t = min(max(t, cursor), end)
        out.append(("+".join(pending), t - cursor))
        cursor, pending = t, []
    if pending:
        out.append(("+".join(pending), end - cursor))
    return out
