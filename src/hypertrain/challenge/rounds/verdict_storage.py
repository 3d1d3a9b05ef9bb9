"""Storage of a round's audits and their verdicts (a part of the rounds storage).

Audit assignments and signed verdicts, read as typed rows, and the one query that
defines a verdict's *standing* (:data:`STANDING_SQL`): whether a dispute overturned it,
whether it is set aside for a re-audit, and whether it is final. Every reader of that
fact (:mod:`hypertrain.challenge.rounds.facts`) goes through
:func:`standing_verdicts`.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import cast

from hypertrain.challenge.rounds.rule import Standing, StandingVerdict, VerdictResult

# Every verdict with its standing: held (a dispute ended without a quorum and with no
# evidence against the island: nothing is burned), set aside (its audit is re-judged by another
# auditor: its auditor was found faulty, or a dispute against it waits for that
# independent re-audit), overturned by a dispute, or standing; and whether it is final
# (its round is final and no late dispute window of its own is open: nothing can
# change its standing any more), and whether a referee or a quorum of re-audits upheld it
# against its island (a dispute lost by a deadline is not such evidence: the judges'
# majority still decides it, ``rule.jury_standing``). It names the dispute game's tables (owned by
# ``hypertrain.dispute.store``) because the standing is one fact of a verdict and its
# disputes; the layering test allows this query, and only it, to name them.
STANDING_SQL = """
SELECT v.verdict_id, v.round, v.hotkey, v.auditor, v.result, v.received_beacon_round,
  CASE
    WHEN EXISTS (SELECT 1 FROM dispute_games d
                 WHERE d.verdict_id = v.verdict_id AND d.outcome = 'held')
      THEN 'held'
    WHEN EXISTS (SELECT 1 FROM reassigned_verdicts s WHERE s.verdict_id = v.verdict_id)
      THEN 'set_aside'
    WHEN EXISTS (SELECT 1 FROM dispute_games d
                 WHERE d.verdict_id = v.verdict_id AND d.outcome = 'overturned')
      THEN 'overturned'
    ELSE 'stands'
  END AS standing,
  EXISTS (SELECT 1 FROM rounds r WHERE r.run_id = v.run_id AND r.round = v.round
          AND r.phase = 'final')
  AND NOT EXISTS (SELECT 1 FROM verdict_windows w
                  WHERE w.verdict_id = v.verdict_id AND w.closed = 0) AS final,
  EXISTS (SELECT 1 FROM dispute_games d
          WHERE d.verdict_id = v.verdict_id AND d.outcome = 'upheld'
          AND json_extract(d.game, '$.steps[#-1].actor') IN ('referee', 'auditors')) AS upheld
FROM verdicts v WHERE v.run_id = ?
"""


@dataclass(frozen=True, slots=True)
class NewVerdict:
    """A signed verdict as it is stored: its id, body and envelope as canonical text."""

    verdict_id: str
    run_id: str
    round: int
    hotkey: str
    auditor: str
    result: str
    body: str
    envelope: str
    received_beacon_round: int


@dataclass(frozen=True, slots=True)
class Judgement:
    """Who judged whose audit in a round."""

    hotkey: str
    auditor: str


def standing_verdicts(
    conn: sqlite3.Connection, run_id: str, index: int | None = None
) -> list[StandingVerdict]:
    """The run's verdicts (or one round's) with their standing, by round and verdict id."""
    sql, args = STANDING_SQL, [run_id]
    if index is not None:
        sql, args = sql + " AND v.round = ?", [run_id, str(index)]
    rows = conn.execute(sql + " ORDER BY v.round, v.verdict_id", args)
    return [
        StandingVerdict(
            r["verdict_id"],
            int(r["round"]),
            r["hotkey"],
            r["auditor"],
            cast(VerdictResult, r["result"]),
            cast(Standing, r["standing"]),
            bool(r["final"]),
            int(r["received_beacon_round"]),
            bool(r["upheld"]),
        )
        for r in rows
    ]


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


def judgements(conn: sqlite3.Connection, run_id: str, index: int) -> list[Judgement]:
    """(island, auditor) of every verdict of a round."""
    rows = conn.execute(
        "SELECT hotkey, auditor FROM verdicts WHERE run_id = ? AND round = ?", (run_id, index)
    )
    return [Judgement(str(r["hotkey"]), str(r["auditor"])) for r in rows]


def signed_verdicts(conn: sqlite3.Connection, run_id: str, auditor: str) -> bool:
    """Whether ``auditor`` signed any verdict of the run."""
    row = conn.execute(
        "SELECT 1 FROM verdicts WHERE run_id = ? AND auditor = ? LIMIT 1", (run_id, auditor)
    ).fetchone()
    return row is not None


def add_verdict(conn: sqlite3.Connection, new: NewVerdict) -> None:
    """Store a verdict (``sqlite3.IntegrityError``: this auditor already judged it)."""
    conn.execute(
        "INSERT INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            new.verdict_id,
            new.run_id,
            new.round,
            new.hotkey,
            new.auditor,
            new.result,
            new.body,
            new.envelope,
            new.received_beacon_round,
        ),
    )
