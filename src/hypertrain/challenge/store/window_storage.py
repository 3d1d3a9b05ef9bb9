"""Storage of late verdicts' own dispute windows (a part of the dispute storage,
:mod:`.game_storage`).

A fault verdict that arrived after its round's dispute window gets a window of its own,
from its arrival (``verdict_windows``); :mod:`.windows` opens and closes them, settlement
waits for them (:func:`~hypertrain.challenge.store.game_storage.disputes_open`).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from hypertrain.challenge.store.game_storage import JudgedVerdict


@dataclass(frozen=True, slots=True)
class DueWindow:
    """An open verdict window that may close now, with its verdict's dispute (if any)."""

    verdict_id: str
    run_id: str
    round: int
    hotkey: str
    result: str
    books_fault: bool
    deadline_round: int
    outcome: str | None  # the dispute's outcome (None: no dispute, or undecided)
    disputed: bool
    set_aside: bool  # another auditor re-judges the verdict


def open_window(
    conn: sqlite3.Connection, verdict: JudgedVerdict, deadline: int, *, books_fault: bool
) -> None:
    """Give a late fault verdict its own dispute window, up to beacon round ``deadline``
    (a ``match`` verdict faults nobody: it gets none)."""
    if verdict.result == "match":
        return
    conn.execute(
        "INSERT OR IGNORE INTO verdict_windows (verdict_id, run_id, round, hotkey, result,"
        " deadline_round, books_fault) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (verdict.verdict_id, verdict.run_id, verdict.round, verdict.hotkey, verdict.result,
         deadline, int(books_fault)),
    )  # fmt: skip


def due_windows(conn: sqlite3.Connection, now: int) -> list[DueWindow]:
    """Open verdict windows that may close at ``now``: past their deadline or disputed."""
    rows = conn.execute(
        "SELECT w.verdict_id, w.run_id, w.round, w.hotkey, w.result, w.books_fault,"
        " w.deadline_round, g.outcome, g.dispute_id IS NOT NULL AS disputed,"
        " x.verdict_id IS NOT NULL AS set_aside FROM verdict_windows w"
        " LEFT JOIN dispute_games g ON g.verdict_id = w.verdict_id"
        " LEFT JOIN reassigned_verdicts x ON x.verdict_id = w.verdict_id"
        " WHERE w.closed = 0 AND (w.deadline_round < ? OR g.outcome IS NOT NULL)"
        " ORDER BY w.verdict_id",
        (now,),
    )
    return [
        DueWindow(
            verdict_id=r["verdict_id"],
            run_id=r["run_id"],
            round=r["round"],
            hotkey=r["hotkey"],
            result=r["result"],
            books_fault=bool(r["books_fault"]),
            deadline_round=r["deadline_round"],
            outcome=r["outcome"],
            disputed=bool(r["disputed"]),
            set_aside=bool(r["set_aside"]),
        )
        for r in rows
    ]


def close_window(conn: sqlite3.Connection, verdict_id: str) -> None:
    conn.execute("UPDATE verdict_windows SET closed = 1 WHERE verdict_id = ?", (verdict_id,))
