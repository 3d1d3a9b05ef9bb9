"""Storage of the verdicts set aside for a re-audit and of the barred auditors (a part of
the dispute storage, :mod:`.game_storage`).

A verdict whose dispute waits for an independent re-audit, or whose auditor was found
faulty, stops counting until another auditor judges its assignment
(``reassigned_verdicts``); an auditor an independent re-audit (or the judges' majority)
found wrong is barred for the run (``faulty_auditors``). The rules are
:mod:`.decisions` and :mod:`.outvoted`; this module only reads and writes rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from hypertrain.challenge.store.game_storage import JudgedVerdict, disputed_verdict
from hypertrain.dispute.model import Game


@dataclass(frozen=True, slots=True)
class SetAside:
    """A verdict set aside for another auditor's re-audit, and whether its dispute is
    still gathering re-audits (stage ``recompute``)."""

    round: int
    hotkey: str
    auditor: str
    verdict_id: str
    dispute_id: str
    recompute: bool


@dataclass(frozen=True, slots=True)
class OutvotedVerdict:
    """A fault verdict the judges' majority of ``match`` outvoted."""

    run_id: str
    round: int
    auditor: str
    verdict_id: str


def set_aside(conn: sqlite3.Connection, game: Game, verdict_id: str, now: int) -> None:
    """The disputed verdict stops counting until another auditor re-audits the assignment."""
    conn.execute(
        "INSERT OR IGNORE INTO reassigned_verdicts VALUES (?, ?, ?, ?, ?, ?, ?)",
        (verdict_id, game.run_id, game.round, game.island, game.auditor, game.dispute_id, now),
    )


def restore(conn: sqlite3.Connection, game: Game, verdict_id: str) -> None:
    """A verdict this game set aside counts again (its dispute was upheld)."""
    conn.execute(
        "DELETE FROM reassigned_verdicts WHERE verdict_id = ? AND dispute_id = ?",
        (verdict_id, game.dispute_id),
    )


def mark_faulty(
    conn: sqlite3.Connection, game: Game, now: int, unfinal: Sequence[JudgedVerdict]
) -> None:
    """An independent re-audit agrees the auditor was wrong: bar it, and set aside its
    verdicts ``unfinal`` (those of the run's rounds not final yet)."""
    conn.execute(
        "INSERT OR IGNORE INTO faulty_auditors VALUES (?, ?, ?, ?)",
        (game.run_id, game.auditor, game.round, game.dispute_id),
    )
    reassign_verdicts(conn, game, now, unfinal)


def bar_outvoted(
    conn: sqlite3.Connection,
    outvoted: OutvotedVerdict,
    now: int,
    unfinal: Sequence[JudgedVerdict],
) -> None:
    """The judges' majority outvoted a verdict and meets the barring rule: bar its
    auditor (the cause is ``outvoted-<verdict id>``, no dispute) and set aside its other
    verdicts ``unfinal`` (the outvoted one keeps its standing)."""
    cause = f"outvoted-{outvoted.verdict_id}"
    conn.execute(
        "INSERT OR IGNORE INTO faulty_auditors VALUES (?, ?, ?, ?)",
        (outvoted.run_id, outvoted.auditor, outvoted.round, cause),
    )
    for v in unfinal:
        if v.verdict_id != outvoted.verdict_id:
            conn.execute(
                "INSERT OR IGNORE INTO reassigned_verdicts VALUES (?, ?, ?, ?, ?, ?, ?)",
                (v.verdict_id, v.run_id, v.round, v.hotkey, v.auditor, cause, now),
            )


def reassign_verdicts(
    conn: sqlite3.Connection, game: Game, now: int, unfinal: Sequence[JudgedVerdict]
) -> int:
    """Stop counting the faulty auditor's other verdicts in rounds that are not final.

    Those rounds are still in their dispute window (settlement waits for it), so their
    rewards are not fixed yet: each such verdict (``unfinal``, all by ``game.auditor``)
    other than the disputed one is set aside (neither a fault nor a pass) and its
    assignment waits for another auditor's verdict, holding the reward until one comes.
    Returns how many verdicts were re-assigned.
    """
    disputed = disputed_verdict(conn, game.dispute_id)
    moved = 0
    for v in unfinal:
        if v.verdict_id == disputed:
            continue
        cur = conn.execute(
            "INSERT OR IGNORE INTO reassigned_verdicts VALUES (?, ?, ?, ?, ?, ?, ?)",
            (v.verdict_id, v.run_id, v.round, v.hotkey, v.auditor, game.dispute_id, now),
        )
        moved += cur.rowcount
    return moved


def is_faulty(conn: sqlite3.Connection, run_id: str, auditor: str) -> bool:
    """Whether an independent re-audit confirmed a dispute against this auditor."""
    row = conn.execute(
        "SELECT 1 FROM faulty_auditors WHERE run_id = ? AND auditor = ? LIMIT 1",
        (run_id, auditor),
    ).fetchone()
    return row is not None


def is_reassigned(conn: sqlite3.Connection, verdict_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM reassigned_verdicts WHERE verdict_id = ?", (verdict_id,)
    ).fetchone()
    return row is not None


def set_aside_verdicts(conn: sqlite3.Connection, run_id: str) -> list[SetAside]:
    """Every verdict of a run set aside for a re-audit, by round and island."""
    rows = conn.execute(
        "SELECT x.round, x.hotkey, x.auditor, x.verdict_id, x.dispute_id, EXISTS (SELECT 1"
        " FROM dispute_games g WHERE g.dispute_id = x.dispute_id AND g.stage = 'recompute')"
        " AS recompute FROM reassigned_verdicts x WHERE x.run_id = ? ORDER BY x.round, x.hotkey",
        (run_id,),
    )
    return [
        SetAside(
            round=r["round"],
            hotkey=r["hotkey"],
            auditor=r["auditor"],
            verdict_id=r["verdict_id"],
            dispute_id=r["dispute_id"],
            recompute=bool(r["recompute"]),
        )
        for r in rows
    ]
