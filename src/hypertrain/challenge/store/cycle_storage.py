"""Storage of competition mode's evaluation cycles and the scores sent for them (a part
of the competition storage, :mod:`.storage`).

A cycle opened at a beacon round with its task and score deadline (``compete_cycles``),
and each evaluator's signed score of each model in it (``compete_scores``; one per
evaluator per model per cycle). When a cycle opens and closes is :mod:`.cycles`; this
module only reads and writes rows, and the caller holds the transaction.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CycleRow:
    """An opened cycle: its beacon round, its deadline, its task (JSON) and whether closed."""

    cycle: int
    beacon_round: int
    score_deadline: int
    task: str
    closed: bool


@dataclass(frozen=True, slots=True)
class NewCycle:
    competition_id: str
    cycle: int
    beacon_round: int
    randomness: str
    pages_key: str
    score_deadline: int
    task: str


@dataclass(frozen=True, slots=True)
class ScoreRow:
    model_sha256: str
    evaluator: str
    losses_f32: str


@dataclass(frozen=True, slots=True)
class NewScore:
    competition_id: str
    cycle: int
    model_sha256: str
    evaluator: str
    losses_f32: str
    envelope: str
    received_beacon_round: int


def _cycle(r: sqlite3.Row) -> CycleRow:
    return CycleRow(
        r["cycle"], r["beacon_round"], r["score_deadline"], r["task"], bool(r["closed"])
    )


def cycle(conn: sqlite3.Connection, competition_id: str, number: int) -> CycleRow | None:
    row = conn.execute(
        "SELECT * FROM compete_cycles WHERE competition_id = ? AND cycle = ?",
        (competition_id, number),
    ).fetchone()
    return None if row is None else _cycle(row)


def open_cycles(conn: sqlite3.Connection, competition_id: str) -> list[int]:
    """The cycles of a competition not closed yet."""
    rows = conn.execute(
        "SELECT cycle FROM compete_cycles WHERE competition_id = ? AND closed = 0",
        (competition_id,),
    )
    return [int(r["cycle"]) for r in rows]


def newest_open_cycle(conn: sqlite3.Connection, competition_id: str) -> CycleRow | None:
    row = conn.execute(
        "SELECT * FROM compete_cycles WHERE competition_id = ? AND closed = 0"
        " ORDER BY cycle DESC LIMIT 1",
        (competition_id,),
    ).fetchone()
    return None if row is None else _cycle(row)


def latest_closed_cycle(conn: sqlite3.Connection, competition_id: str) -> int | None:
    row = conn.execute(
        "SELECT MAX(cycle) AS c FROM compete_cycles WHERE competition_id = ? AND closed = 1",
        (competition_id,),
    ).fetchone()
    return None if row["c"] is None else int(row["c"])


def cycle_tasks(conn: sqlite3.Connection, competition_id: str) -> list[str]:
    """The task (JSON) of every opened cycle of a competition."""
    rows = conn.execute(
        "SELECT task FROM compete_cycles WHERE competition_id = ?", (competition_id,)
    )
    return [str(r["task"]) for r in rows]


def add_cycle(conn: sqlite3.Connection, new: NewCycle) -> None:
    """Store an opened cycle (a cycle already stored is kept as it is)."""
    conn.execute(
        "INSERT OR IGNORE INTO compete_cycles (competition_id, cycle, beacon_round,"
        " randomness, pages_key, score_deadline, task) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (new.competition_id, new.cycle, new.beacon_round, new.randomness, new.pages_key,
         new.score_deadline, new.task),
    )  # fmt: skip


def close_cycle(conn: sqlite3.Connection, competition_id: str, number: int) -> None:
    conn.execute(
        "UPDATE compete_cycles SET closed = 1 WHERE competition_id = ? AND cycle = ?",
        (competition_id, number),
    )


def scores(conn: sqlite3.Connection, competition_id: str, number: int) -> list[ScoreRow]:
    """Every score stored for a cycle."""
    rows = conn.execute(
        "SELECT model_sha256, evaluator, losses_f32 FROM compete_scores"
        " WHERE competition_id = ? AND cycle = ?",
        (competition_id, number),
    )
    return [ScoreRow(r["model_sha256"], r["evaluator"], r["losses_f32"]) for r in rows]


def scored_by(
    conn: sqlite3.Connection, competition_id: str, number: int, evaluator: str
) -> list[str]:
    """The model hashes ``evaluator`` scored in a cycle, sorted."""
    rows = conn.execute(
        "SELECT model_sha256 FROM compete_scores WHERE competition_id = ? AND cycle = ?"
        " AND evaluator = ? ORDER BY model_sha256",
        (competition_id, number, evaluator),
    )
    return [str(r["model_sha256"]) for r in rows]


def score_envelopes(conn: sqlite3.Connection, competition_id: str, number: int) -> list[str]:
    """The signed scores (JSON) of a cycle, by evaluator and model hash."""
    rows = conn.execute(
        "SELECT envelope FROM compete_scores WHERE competition_id = ? AND cycle = ?"
        " ORDER BY evaluator, model_sha256",
        (competition_id, number),
    )
    return [str(r["envelope"]) for r in rows]


def add_score(conn: sqlite3.Connection, new: NewScore) -> None:
    """Store a score (raises ``sqlite3.IntegrityError`` when the evaluator already
    scored that model in that cycle)."""
    conn.execute(
        "INSERT INTO compete_scores VALUES (?, ?, ?, ?, ?, ?, ?)",
        (new.competition_id, new.cycle, new.model_sha256, new.evaluator, new.losses_f32,
         new.envelope, new.received_beacon_round),
    )  # fmt: skip
