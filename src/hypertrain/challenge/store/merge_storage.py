"""Storage of merge tapes, their corrections and the proven faults they roll back
(a part of the rounds storage).

A round's accepted merge tape (``merges``), the signed corrections that supersede it
in order (``merge_corrections``, ``seq`` from 1) and the faults proven for merged
rounds (``proven_faults``). The rules of a valid correction are in
:mod:`hypertrain.challenge.settlement.rollbacks`; this module only reads and writes rows.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NewMerge:
    """An accepted merge tape as it is stored (body and envelope as canonical text)."""

    run_id: str
    round: int
    aggregator: str
    new_model_sha256: str
    eval_loss: float | None
    body: str
    envelope: str
    received_beacon_round: int


@dataclass(frozen=True, slots=True)
class NewCorrection:
    """A signed merge correction as it is stored."""

    run_id: str
    round: int
    tape_sha256: str
    supersedes: str
    body: str
    envelope: str
    received_beacon_round: int


@dataclass(frozen=True, slots=True)
class ProvenFaultRow:
    """A fault proven for an island in a round, with the epoch it was booked at."""

    round: int
    hotkey: str
    reason: str
    epoch: int


def add_merge(conn: sqlite3.Connection, new: NewMerge) -> None:
    """Store a round's merge tape (``sqlite3.IntegrityError`` when it has one)."""
    conn.execute(
        "INSERT INTO merges VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            new.run_id,
            new.round,
            new.aggregator,
            new.new_model_sha256,
            new.eval_loss,
            new.body,
            new.envelope,
            new.received_beacon_round,
        ),
    )


def tape_signers(conn: sqlite3.Connection, run_id: str) -> frozenset[str]:
    """The keys that signed one of the run's merge tapes."""
    rows = conn.execute("SELECT aggregator FROM merges WHERE run_id = ?", (run_id,))
    return frozenset(str(r["aggregator"]) for r in rows)


def signed_tapes(conn: sqlite3.Connection, run_id: str, aggregator: str) -> bool:
    """Whether ``aggregator`` signed any merge tape of the run."""
    row = conn.execute(
        "SELECT 1 FROM merges WHERE run_id = ? AND aggregator = ? LIMIT 1", (run_id, aggregator)
    ).fetchone()
    return row is not None


def tape_bodies(conn: sqlite3.Connection, run_id: str) -> dict[int, str]:
    """round -> its accepted merge tape's body (JSON), for every merged round."""
    rows = conn.execute("SELECT round, body FROM merges WHERE run_id = ?", (run_id,))
    return {int(r["round"]): str(r["body"]) for r in rows}


def merged_rounds(conn: sqlite3.Connection, run_id: str) -> list[int]:
    """The run's merged rounds, in order."""
    rows = conn.execute("SELECT round FROM merges WHERE run_id = ? ORDER BY round", (run_id,))
    return [int(r["round"]) for r in rows]


def merged_before(conn: sqlite3.Connection, run_id: str, index: int) -> int | None:
    """The latest merged round before round ``index`` (None: no earlier merge)."""
    row = conn.execute(
        "SELECT MAX(round) AS r FROM merges WHERE run_id = ? AND round < ?", (run_id, index)
    ).fetchone()
    return None if row["r"] is None else int(row["r"])


def latest_correction(conn: sqlite3.Connection, run_id: str, index: int) -> str | None:
    """The body (JSON) of the round's latest merge correction (None: never corrected)."""
    row = conn.execute(
        "SELECT body FROM merge_corrections WHERE run_id = ? AND round = ?"
        " ORDER BY seq DESC LIMIT 1",
        (run_id, index),
    ).fetchone()
    return None if row is None else str(row["body"])


def correction_envelopes(conn: sqlite3.Connection, run_id: str, index: int) -> list[str]:
    """The round's signed corrections (JSON envelopes), oldest first."""
    rows = conn.execute(
        "SELECT envelope FROM merge_corrections WHERE run_id = ? AND round = ? ORDER BY seq",
        (run_id, index),
    )
    return [str(r["envelope"]) for r in rows]


def add_correction(conn: sqlite3.Connection, new: NewCorrection) -> int:
    """Append a correction to its round's chain (inside the caller's transaction); its seq.

    ``sqlite3.IntegrityError`` when the superseded tape was already superseded.
    """
    (count,) = conn.execute(
        "SELECT COUNT(*) FROM merge_corrections WHERE run_id = ? AND round = ?",
        (new.run_id, new.round),
    ).fetchone()
    seq = int(count) + 1
    conn.execute(
        "INSERT INTO merge_corrections VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (new.run_id, new.round, seq, new.tape_sha256, new.supersedes, new.body, new.envelope,
         new.received_beacon_round),
    )  # fmt: skip
    return seq


def add_proven_fault(
    conn: sqlite3.Connection, run_id: str, fault: ProvenFaultRow, *, max_reason: int = 512
) -> None:
    """Record a proven fault once (a second booking of the same fault changes nothing);
    the reason is stored cut to ``max_reason`` characters."""
    conn.execute(
        "INSERT OR IGNORE INTO proven_faults VALUES (?, ?, ?, ?, ?)",
        (run_id, fault.round, fault.hotkey, fault.reason[:max_reason], fault.epoch),
    )


def proven_faults(conn: sqlite3.Connection, run_id: str) -> list[ProvenFaultRow]:
    """Every proven fault of the run, by round and hotkey."""
    rows = conn.execute(
        "SELECT round, hotkey, reason, epoch FROM proven_faults WHERE run_id = ?"
        " ORDER BY round, hotkey",
        (run_id,),
    )
    return [
        ProvenFaultRow(int(r["round"]), str(r["hotkey"]), str(r["reason"]), int(r["epoch"]))
        for r in rows
    ]


def merge_received(conn: sqlite3.Connection, run_id: str, index: int) -> int | None:
    """The beacon round at which the round's merge tape arrived (None: no tape)."""
    row = conn.execute(
        "SELECT received_beacon_round FROM merges WHERE run_id = ? AND round = ?",
        (run_id, index),
    ).fetchone()
    return None if row is None else int(row["received_beacon_round"])


def correction_arrivals(conn: sqlite3.Connection, run_id: str, index: int) -> list[tuple[int, str]]:
    """(beacon round it arrived at, body as JSON) of each of the round's corrections,
    oldest first."""
    rows = conn.execute(
        "SELECT received_beacon_round, body FROM merge_corrections"
        " WHERE run_id = ? AND round = ? ORDER BY seq",
        (run_id, index),
    )
    return [(int(r["received_beacon_round"]), str(r["body"])) for r in rows]


def merge_envelope(conn: sqlite3.Connection, run_id: str, index: int) -> str | None:
    row = conn.execute(
        "SELECT envelope FROM merges WHERE run_id = ? AND round = ?", (run_id, index)
    ).fetchone()
    return None if row is None else str(row["envelope"])


def merge_body(conn: sqlite3.Connection, run_id: str, index: int) -> str | None:
    row = conn.execute(
        "SELECT body FROM merges WHERE run_id = ? AND round = ?", (run_id, index)
    ).fetchone()
    return None if row is None else str(row["body"])


def last_sync(conn: sqlite3.Connection, run_id: str, hotkey: str) -> int | None:
    """Beacon round at which the last merge including this island's commit was accepted."""
    row = conn.execute(
        "SELECT MAX(m.received_beacon_round) AS b FROM merges m JOIN commits c"
        " ON c.run_id = m.run_id AND c.round = m.round WHERE m.run_id = ? AND c.hotkey = ?",
        (run_id, hotkey),
    ).fetchone()
    return None if row is None or row["b"] is None else int(row["b"])
