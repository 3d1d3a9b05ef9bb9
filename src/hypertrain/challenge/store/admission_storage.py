"""Storage of admission challenges: one row per (run, island), the join request it
holds, its seed, the island's answers and how it closed.

This module owns ``admission_challenges``; the rules of a challenge (its deadlines,
the sample a worker checks, when it admits) are in
:mod:`hypertrain.challenge.admission.challenge`.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Literal, cast

ChallengeStatus = Literal["pending", "answered", "admitted", "refused"]


@dataclass(frozen=True, slots=True)
class NewChallenge:
    """A challenge as it opens (the join request as canonical JSON)."""

    run_id: str
    hotkey: str
    device_class: str
    join_body: str
    join_beacon_round: int
    seed_beacon_round: int
    deadline_round: int
    refusals: int = 0  # the hotkey's refusals so far (the backoff outlives a row)


@dataclass(frozen=True, slots=True)
class ChallengeRow:
    """A stored challenge: its join request, seed, answers (JSON) and status."""

    run_id: str
    hotkey: str
    device_class: str
    join_body: str
    join_beacon_round: int
    seed_beacon_round: int
    deadline_round: int
    seed: int | None
    hashes: str | None
    memory_answers: str | None
    answered_round: int | None
    status: ChallengeStatus
    reason: str
    refusals: int  # refusals of this hotkey in the run so far
    retry_round: int  # the first beacon round a new join may come (the backoff)


def _row(r: sqlite3.Row) -> ChallengeRow:
    return ChallengeRow(
        run_id=r["run_id"],
        hotkey=r["hotkey"],
        device_class=r["device_class"],
        join_body=r["join_body"],
        join_beacon_round=r["join_beacon_round"],
        seed_beacon_round=r["seed_beacon_round"],
        deadline_round=r["deadline_round"],
        seed=r["seed"],
        hashes=r["hashes"],
        memory_answers=r["memory_answers"],
        answered_round=r["answered_round"],
        status=cast(ChallengeStatus, r["status"]),
        reason=r["reason"],
        refusals=int(r["refusals"]),
        retry_round=int(r["retry_round"]),
    )


def challenge(conn: sqlite3.Connection, run_id: str, hotkey: str) -> ChallengeRow | None:
    """The island's challenge in the run (None: it never had one)."""
    row = conn.execute(
        "SELECT * FROM admission_challenges WHERE run_id = ? AND hotkey = ?", (run_id, hotkey)
    ).fetchone()
    return None if row is None else _row(row)


def answered(conn: sqlite3.Connection, run_id: str) -> list[ChallengeRow]:
    """The run's answered challenges (awaiting a worker's check), by hotkey."""
    rows = conn.execute(
        "SELECT * FROM admission_challenges WHERE run_id = ? AND status = 'answered'"
        " ORDER BY hotkey",
        (run_id,),
    ).fetchall()
    return [_row(r) for r in rows]


def replace_challenge(conn: sqlite3.Connection, new: NewChallenge) -> None:
    """Open a pending challenge, dropping the island's earlier one (in the caller's
    transaction)."""
    conn.execute(
        "DELETE FROM admission_challenges WHERE run_id = ? AND hotkey = ?",
        (new.run_id, new.hotkey),
    )
    conn.execute(
        "INSERT INTO admission_challenges (run_id, hotkey, device_class, join_body,"
        " join_beacon_round, seed_beacon_round, deadline_round, refusals)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            new.run_id,
            new.hotkey,
            new.device_class,
            new.join_body,
            new.join_beacon_round,
            new.seed_beacon_round,
            new.deadline_round,
            new.refusals,
        ),
    )


def record_answer(
    conn: sqlite3.Connection,
    run_id: str,
    hotkey: str,
    hashes: str,
    memory_answers: str,
    answered_round: int,
) -> None:
    """The island's per-device hashes and memory answers (JSON): the challenge is answered."""
    conn.execute(
        "UPDATE admission_challenges SET hashes = ?, memory_answers = ?, answered_round = ?,"
        " status = 'answered' WHERE run_id = ? AND hotkey = ?",
        (hashes, memory_answers, answered_round, run_id, hotkey),
    )


def set_seed(conn: sqlite3.Connection, run_id: str, hotkey: str, seed: int) -> None:
    conn.execute(
        "UPDATE admission_challenges SET seed = ? WHERE run_id = ? AND hotkey = ?",
        (seed, run_id, hotkey),
    )


def close(
    conn: sqlite3.Connection, run_id: str, hotkey: str, status: ChallengeStatus, reason: str
) -> None:
    """The challenge ends ``admitted`` or ``refused`` (with the reason)."""
    conn.execute(
        "UPDATE admission_challenges SET status = ?, reason = ? WHERE run_id = ? AND hotkey = ?",
        (status, reason, run_id, hotkey),
    )


def record_refusal(
    conn: sqlite3.Connection, run_id: str, hotkey: str, refusals: int, retry_round: int
) -> None:
    """Count a refusal: the hotkey may join again from ``retry_round`` on."""
    conn.execute(
        "UPDATE admission_challenges SET refusals = ?, retry_round = ?"
        " WHERE run_id = ? AND hotkey = ?",
        (refusals, retry_round, run_id, hotkey),
    )
