"""Appending to a run's journal and updating the materialised balances with it.

Every function here runs inside the caller's transaction and takes the connection
explicitly. :func:`append` is the only way an entry is written: it links the entry to
the run's head, inserts it (the UNIQUE natural key refuses a repeat) and moves the head.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from hypertrain.ledger.errors import UnknownRunError
from hypertrain.ledger.journal import Entry, Kind, make_entry


@dataclass(frozen=True, slots=True)
class RunConfig:
    run_id: str
    pool_per_round: int
    vesting_rounds: int
    clock: int


def load_run(conn: sqlite3.Connection, run_id: str) -> RunConfig:
    row = conn.execute(
        "SELECT pool_per_round, vesting_rounds, clock FROM runs WHERE run_id = ?", (run_id,)
    ).fetchone()
    if row is None:
        raise UnknownRunError(f"unknown run {run_id!r}")
    return RunConfig(run_id, int(row[0]), int(row[1]), int(row[2]))


def append(
    conn: sqlite3.Connection,
    run_id: str,
    kind: Kind,
    point: int,
    *,
    hotkey: str = "",
    amount: int = 0,
    epoch: int = 0,
    detail: dict[str, Any] | None = None,
    reason: str = "",
) -> Entry:
    """Write one entry at the head of ``run_id``'s chain."""
    head_seq, head_hash = conn.execute(
        "SELECT head_seq, head_hash FROM runs WHERE run_id = ?", (run_id,)
    ).fetchone()
    entry = make_entry(
        run=run_id, seq=int(head_seq) + 1, prev=str(head_hash), kind=kind, point=point,
        hotkey=hotkey, amount=amount, epoch=epoch, detail=detail, reason=reason,
    )  # fmt: skip
    conn.execute(
        "INSERT INTO journal (run_id, seq, kind, point, hotkey, amount, body, hash)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, entry.seq, kind, point, hotkey, amount, entry.body, entry.hash),
    )
    conn.execute(
        "UPDATE runs SET head_seq = ?, head_hash = ? WHERE run_id = ?",
        (entry.seq, entry.hash, run_id),
    )
    return entry


def has_key(conn: sqlite3.Connection, run_id: str, kind: str, point: int, hotkey: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM journal WHERE run_id = ? AND kind = ? AND point = ? AND hotkey = ?",
        (run_id, kind, point, hotkey),
    ).fetchone()
    return row is not None


def add_balance(
    conn: sqlite3.Connection,
    run_id: str,
    hotkey: str,
    *,
    escrowed: int = 0,
    vested: int = 0,
    paid: int = 0,
    burned: int = 0,
) -> None:
    """Add (possibly negative) deltas to one balance row, creating it if needed."""
    conn.execute(
        "INSERT INTO balances (run_id, hotkey, escrowed, vested, paid, burned)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, hotkey) DO UPDATE SET"
        " escrowed = escrowed + excluded.escrowed, vested = vested + excluded.vested,"
        " paid = paid + excluded.paid, burned = burned + excluded.burned",
        (run_id, hotkey, escrowed, vested, paid, burned),
    )
