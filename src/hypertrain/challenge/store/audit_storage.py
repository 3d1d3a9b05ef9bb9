"""Storage of a round's audit assignments (a part of the rounds storage).

The signed assignments (``audits``) with the beacon round that selected them, the load
they put on the auditors, the assignments still waiting for a verdict, and an island's
record of rounds run and audited. Which islands are audited is
:mod:`hypertrain.challenge.rounds.selection`; this module only reads and writes rows.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AuditRow:
    """An audit assignment with the beacon round (and randomness) that selected it."""

    round: int
    hotkey: str
    segments: str  # JSON list of segment indices
    probation: bool
    selection_beacon_round: int | None
    randomness: str | None


@dataclass(frozen=True, slots=True)
class UnjudgedAudit:
    round: int
    hotkey: str
    envelope: str  # the signed assignment


@dataclass(frozen=True, slots=True)
class IslandSpan:
    """One island's record over rounds ``first`` to ``last``: rounds it committed to and
    rounds it was audited in (which of them faulted it is the settlement rule's:
    ``facts.run_accusations``, never a raw verdict count)."""

    rounds_run: int
    audited: int


def add_audit(
    conn: sqlite3.Connection,
    run_id: str,
    index: int,
    hotkey: str,
    segments: str,
    probation: bool,
    envelope: str,
) -> None:
    conn.execute(
        "INSERT INTO audits VALUES (?, ?, ?, ?, ?, ?)",
        (run_id, index, hotkey, segments, int(probation), envelope),
    )


def audits(conn: sqlite3.Connection, run_id: str) -> list[AuditRow]:
    """Every audit of a run, newest round first, with the beacon round that selected it."""
    rows = conn.execute(
        """
        SELECT a.round, a.hotkey, a.segments, a.probation, r.selection_beacon_round,
               b.randomness
        FROM audits a JOIN rounds r ON r.run_id = a.run_id AND r.round = a.round
        LEFT JOIN beacons b ON b.round = r.selection_beacon_round
        WHERE a.run_id = ? ORDER BY a.round DESC, a.hotkey
        """,
        (run_id,),
    )
    return [
        AuditRow(
            r["round"],
            r["hotkey"],
            r["segments"],
            bool(r["probation"]),
            r["selection_beacon_round"],
            r["randomness"],
        )
        for r in rows
    ]


def assignment_envelopes(conn: sqlite3.Connection, run_id: str, index: int) -> list[str]:
    rows = conn.execute(
        "SELECT envelope FROM audits WHERE run_id = ? AND round = ? ORDER BY hotkey",
        (run_id, index),
    )
    return [r["envelope"] for r in rows]


def assignment_envelope(
    conn: sqlite3.Connection, run_id: str, index: int, hotkey: str
) -> str | None:
    """The signed audit assignment of one island's round (None: it was not audited)."""
    row = conn.execute(
        "SELECT envelope FROM audits WHERE run_id = ? AND round = ? AND hotkey = ?",
        (run_id, index, hotkey),
    ).fetchone()
    return None if row is None else str(row["envelope"])


def probation_flags(conn: sqlite3.Connection, run_id: str, index: int) -> dict[str, bool]:
    """hotkey -> whether its audit in the round was a probation audit."""
    rows = conn.execute(
        "SELECT hotkey, probation FROM audits WHERE run_id = ? AND round = ?", (run_id, index)
    )
    return {r["hotkey"]: bool(r["probation"]) for r in rows}


def audit_load(conn: sqlite3.Connection, run_id: str, index: int) -> list[tuple[str, bool, str]]:
    """(segments JSON, island still in probation, island hotkey) of each audit of a round."""
    rows = conn.execute(
        "SELECT a.segments, COALESCE(r.probation_until_round, 0) > a.round AS new, a.hotkey"
        " FROM audits a LEFT JOIN roster r ON r.run_id = a.run_id AND r.hotkey = a.hotkey"
        " WHERE a.run_id = ? AND a.round = ?",
        (run_id, index),
    )
    return [(r["segments"], bool(r["new"]), r["hotkey"]) for r in rows]


def unjudged_audits(conn: sqlite3.Connection, run_id: str, now: int) -> list[UnjudgedAudit]:
    """Assigned audits of rounds past their audit phase that no verdict ever judged, or
    whose late panel is still open at beacon round ``now``, by round and island."""
    rows = conn.execute(
        "SELECT a.round, a.hotkey, a.envelope FROM audits a JOIN rounds r"
        " ON r.run_id = a.run_id AND r.round = a.round"
        " WHERE a.run_id = ? AND r.phase IN ('merge', 'settle', 'final') AND (NOT EXISTS"
        " (SELECT 1 FROM verdicts v WHERE v.run_id = a.run_id AND v.round = a.round"
        " AND v.hotkey = a.hotkey) OR EXISTS (SELECT 1 FROM late_panels p"
        " WHERE p.run_id = a.run_id AND p.round = a.round AND p.hotkey = a.hotkey"
        " AND p.close_round >= ?)) ORDER BY a.round, a.hotkey",
        (run_id, now),
    )
    return [UnjudgedAudit(r["round"], r["hotkey"], r["envelope"]) for r in rows]


def audit_phase_audits(conn: sqlite3.Connection, run_id: str) -> list[UnjudgedAudit]:
    """Assigned audits of the run's rounds in their audit phase, by round and island."""
    rows = conn.execute(
        "SELECT a.round, a.hotkey, a.envelope FROM audits a JOIN rounds r"
        " ON r.run_id = a.run_id AND r.round = a.round"
        " WHERE a.run_id = ? AND r.phase = 'audit' ORDER BY a.round, a.hotkey",
        (run_id,),
    )
    return [UnjudgedAudit(r["round"], r["hotkey"], r["envelope"]) for r in rows]


def island_span(
    conn: sqlite3.Connection, run_id: str, hotkey: str, first: int, last: int
) -> IslandSpan:
    bind = (hotkey, run_id, first, last)
    return IslandSpan(
        rounds_run=_count(
            conn,
            "SELECT COUNT(*) FROM commits WHERE hotkey = ? AND run_id = ?"
            " AND round BETWEEN ? AND ?",
            bind,
        ),
        audited=_count(
            conn,
            "SELECT COUNT(*) FROM audits WHERE hotkey = ? AND run_id = ? AND round BETWEEN ? AND ?",
            bind,
        ),
    )


def _count(conn: sqlite3.Connection, sql: str, args: tuple[str | int, ...]) -> int:
    return int(conn.execute(sql, args).fetchone()[0])


def assigned(conn: sqlite3.Connection, run_id: str, index: int) -> list[str]:
    """The hotkeys selected for audit in a round."""
    rows = conn.execute("SELECT hotkey FROM audits WHERE run_id = ? AND round = ?", (run_id, index))
    return [str(r["hotkey"]) for r in rows]


def assigned_before(conn: sqlite3.Connection, run_id: str, index: int) -> list[tuple[int, str]]:
    """(round, hotkey) of every audit assignment of the run before round ``index``."""
    rows = conn.execute(
        "SELECT round, hotkey FROM audits WHERE run_id = ? AND round < ?", (run_id, index)
    )
    return [(int(r["round"]), str(r["hotkey"])) for r in rows]


def audit_segments(conn: sqlite3.Connection, run_id: str, index: int, hotkey: str) -> str | None:
    """The assigned segments (JSON list) of an island's audit, None if it was not selected."""
    row = conn.execute(
        "SELECT segments FROM audits WHERE run_id = ? AND round = ? AND hotkey = ?",
        (run_id, index, hotkey),
    ).fetchone()
    return None if row is None else str(row["segments"])
