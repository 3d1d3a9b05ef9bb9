"""Storage of a round's verdicts (a part of the rounds storage).

Signed verdicts, read as typed rows, and the one query that
defines a verdict's *standing* (:data:`STANDING_SQL`): whether a dispute overturned it,
whether it is set aside for a re-audit, and whether it is final. Every reader of that
fact (:mod:`hypertrain.challenge.facts`) goes through
:func:`standing_verdicts`.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import cast

from hypertrain.challenge.rule import Standing, StandingVerdict, VerdictResult

# Every verdict with its standing: held (a dispute ended without a quorum and with no
# evidence against the island: nothing is burned), set aside (its audit is re-judged by another
# auditor: its auditor was found faulty, or a dispute against it waits for that
# independent re-audit), overturned by a dispute, or standing; and whether it is final
# (its round is final and no late dispute window of its own is open: nothing can
# change its standing any more), and whether a referee or a quorum of re-audits upheld it
# against its island (a dispute lost by a deadline is not such evidence: the judges'
# majority still decides it, ``rule.jury_standing``). It names the dispute game's tables
# (owned by ``hypertrain.challenge.store.game_storage`` and its parts) because the
# standing is one fact of a verdict and its disputes; the layering test allows this
# query, and only it, to name them.
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


@dataclass(frozen=True, slots=True)
class VerdictRow:
    verdict_id: str
    auditor: str
    result: str
    body: str  # the verdict body as stored (JSON)


@dataclass(frozen=True, slots=True)
class VerdictRecord:
    """A stored verdict: who judged which island in which round, its result and arrival."""

    verdict_id: str
    run_id: str
    round: int
    hotkey: str
    auditor: str
    result: str
    body: str  # the verdict body as stored (JSON)
    received_beacon_round: int


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


def _verdict_record(r: sqlite3.Row) -> VerdictRecord:
    return VerdictRecord(
        verdict_id=r["verdict_id"],
        run_id=r["run_id"],
        round=r["round"],
        hotkey=r["hotkey"],
        auditor=r["auditor"],
        result=r["result"],
        body=r["body"],
        received_beacon_round=r["received_beacon_round"],
    )


def verdict_envelopes(conn: sqlite3.Connection, run_id: str, index: int) -> list[tuple[str, str]]:
    """(verdict id, signed envelope) of a round's verdicts, by verdict id."""
    rows = conn.execute(
        "SELECT verdict_id, envelope FROM verdicts WHERE run_id = ? AND round = ?"
        " ORDER BY verdict_id",
        (run_id, index),
    )
    return [(r["verdict_id"], r["envelope"]) for r in rows]


def verdicts_on(conn: sqlite3.Connection, run_id: str, index: int, hotkey: str) -> list[VerdictRow]:
    """The verdicts on one island's audit in a round, by auditor."""
    rows = conn.execute(
        "SELECT verdict_id, auditor, result, body FROM verdicts"
        " WHERE run_id = ? AND round = ? AND hotkey = ? ORDER BY auditor",
        (run_id, index, hotkey),
    )
    return [VerdictRow(r["verdict_id"], r["auditor"], r["result"], r["body"]) for r in rows]


def verdict_record(
    conn: sqlite3.Connection, run_id: str, index: int, verdict_id: str
) -> VerdictRecord | None:
    """A verdict of a round by its id (None: no such verdict in that round)."""
    row = conn.execute(
        "SELECT verdict_id, run_id, round, hotkey, auditor, result, body,"
        " received_beacon_round FROM verdicts WHERE verdict_id = ? AND run_id = ? AND round = ?",
        (verdict_id, run_id, index),
    ).fetchone()
    return None if row is None else _verdict_record(row)


def fault_verdicts_received(
    conn: sqlite3.Connection, run_id: str, index: int, hotkey: str, received: int
) -> list[VerdictRecord]:
    """The fault verdicts (anything but ``match``) on one island of round ``index`` that
    arrived at beacon round ``received``, by id."""
    rows = conn.execute(
        "SELECT verdict_id, run_id, round, hotkey, auditor, result, body,"
        " received_beacon_round FROM verdicts WHERE run_id = ? AND round = ? AND hotkey = ?"
        " AND received_beacon_round = ? AND result != 'match' ORDER BY verdict_id",
        (run_id, index, hotkey, received),
    ).fetchall()
    return [_verdict_record(r) for r in rows]


def verdict_by(
    conn: sqlite3.Connection, run_id: str, index: int, hotkey: str, auditor: str
) -> VerdictRecord | None:
    """One auditor's verdict on one island's round (None: it has not judged it)."""
    row = conn.execute(
        "SELECT verdict_id, run_id, round, hotkey, auditor, result, body,"
        " received_beacon_round FROM verdicts WHERE run_id = ? AND round = ? AND hotkey = ?"
        " AND auditor = ?",
        (run_id, index, hotkey, auditor),
    ).fetchone()
    return None if row is None else _verdict_record(row)


def other_verdicts(
    conn: sqlite3.Connection, run_id: str, index: int, hotkey: str, auditor: str
) -> list[VerdictRecord]:
    """The verdicts of every other auditor on one island's round, in order of arrival."""
    rows = conn.execute(
        "SELECT verdict_id, run_id, round, hotkey, auditor, result, body,"
        " received_beacon_round FROM verdicts WHERE run_id = ? AND round = ? AND hotkey = ?"
        " AND auditor != ? ORDER BY received_beacon_round, verdict_id",
        (run_id, index, hotkey, auditor),
    )
    return [_verdict_record(r) for r in rows]


def unfinal_verdicts_by(conn: sqlite3.Connection, run_id: str, auditor: str) -> list[VerdictRecord]:
    """An auditor's verdicts in the rounds of a run that are not final, by round and island."""
    rows = conn.execute(
        "SELECT v.verdict_id, v.run_id, v.round, v.hotkey, v.auditor, v.result, v.body,"
        " v.received_beacon_round FROM verdicts v JOIN rounds r ON r.run_id = v.run_id"
        " AND r.round = v.round WHERE v.run_id = ? AND v.auditor = ? AND r.phase != 'final'"
        " ORDER BY v.round, v.hotkey",
        (run_id, auditor),
    )
    return [_verdict_record(r) for r in rows]


def verdicts_signed(
    conn: sqlite3.Connection, run_id: str, auditor: str, first: int, last: int
) -> int:
    """How many verdicts an auditor signed in rounds ``first`` to ``last``."""
    row = conn.execute(
        "SELECT COUNT(*) FROM verdicts WHERE auditor = ? AND run_id = ? AND round BETWEEN ? AND ?",
        (auditor, run_id, first, last),
    ).fetchone()
    return int(row[0])


def verdict_signers(
    conn: sqlite3.Connection, run_id: str, until: int | None = None
) -> frozenset[str]:
    """Every key that signed a verdict of the run (received by beacon round ``until``)."""
    sql, args = "SELECT DISTINCT auditor FROM verdicts WHERE run_id = ?", [run_id]
    if until is not None:
        sql, args = sql + " AND received_beacon_round <= ?", [run_id, str(until)]
    return frozenset(str(r[0]) for r in conn.execute(sql, args))


def judges_of(conn: sqlite3.Connection, run_id: str, index: int) -> dict[str, frozenset[str]]:
    """Assigned hotkey of a round -> the keys that signed a verdict on it."""
    out: dict[str, set[str]] = {
        str(r[0]): set()
        for r in conn.execute(
            "SELECT hotkey FROM audits WHERE run_id = ? AND round = ?", (run_id, index)
        )
    }
    for hotkey, auditor in conn.execute(
        "SELECT hotkey, auditor FROM verdicts WHERE run_id = ? AND round = ?", (run_id, index)
    ):
        if hotkey in out:
            out[hotkey].add(str(auditor))
    return {h: frozenset(keys) for h, keys in out.items()}
