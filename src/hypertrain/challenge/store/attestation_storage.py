"""Storage of tape witnesses' attestations (the ``tape_attestations`` table), typed rows.

One row per witness key and tape: a key says once whether its recomputation of a tape
agrees (``UNIQUE`` by the primary key); a correction's tape is a new tape, attested
afresh. Nothing here decides anything: :func:`hypertrain.challenge.tape_rule.tape_status`
does, over these rows.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AttestationRow:
    """A stored attestation and its signed envelope's canonical text."""

    run_id: str
    round: int
    tape_sha256: str
    witness: str
    agrees: bool
    first_difference: str | None
    envelope: str
    received_round: int


def add(conn: sqlite3.Connection, row: AttestationRow) -> bool:
    """Store one attestation (in the caller's transaction); False if the key already
    attested this tape."""
    try:
        conn.execute(
            "INSERT INTO tape_attestations VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (row.run_id, row.round, row.tape_sha256, row.witness, int(row.agrees),
             row.first_difference, row.envelope, row.received_round),
        )  # fmt: skip
    except sqlite3.IntegrityError:
        return False
    return True


def for_round(conn: sqlite3.Connection, run_id: str, index: int) -> list[AttestationRow]:
    """Every attestation on the round's tapes, in arrival order."""
    rows = conn.execute(
        "SELECT * FROM tape_attestations WHERE run_id = ? AND round = ? ORDER BY rowid",
        (run_id, index),
    )
    return [
        AttestationRow(
            r["run_id"],
            int(r["round"]),
            r["tape_sha256"],
            r["witness"],
            bool(r["agrees"]),
            r["first_difference"],
            r["envelope"],
            int(r["received_round"]),
        )
        for r in rows
    ]


def has_attested(conn: sqlite3.Connection, run_id: str, signer: str) -> bool:
    """Whether ``signer`` attested any tape of the run (it holds the witness role)."""
    return (
        conn.execute(
            "SELECT 1 FROM tape_attestations WHERE run_id = ? AND witness = ? LIMIT 1",
            (run_id, signer),
        ).fetchone()
        is not None
    )
