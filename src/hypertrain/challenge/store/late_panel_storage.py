"""Storage of the late panels of missed assignments (a part of the rounds storage).

An assignment with no judging verdict when its audit phase ended gets a late window once
its first late verdict arrives: the jury fixed then and the window's last round
(``late_panels``). The rule that opens and reads it is :mod:`.late`; this module only
reads and writes the rows.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LatePanelRow:
    """The late window of an assignment that had no judging verdict when its audit phase
    ended: the jury fixed when its first late verdict came, and the window's last round."""

    round: int
    hotkey: str
    opened_beacon_round: int
    close_round: int
    jury: tuple[str, ...]


def late_panels(
    conn: sqlite3.Connection, run_id: str, index: int | None = None
) -> list[LatePanelRow]:
    """The run's late panels (or one round's), by round and island."""
    sql, args = "SELECT * FROM late_panels WHERE run_id = ?", [run_id]
    if index is not None:
        sql, args = sql + " AND round = ?", [run_id, str(index)]
    rows = conn.execute(sql + " ORDER BY round, hotkey", args)
    return [
        LatePanelRow(
            int(r["round"]),
            r["hotkey"],
            int(r["opened_beacon_round"]),
            int(r["close_round"]),
            tuple(str(k) for k in json.loads(r["jury"])),
        )
        for r in rows
    ]


def late_panel(
    conn: sqlite3.Connection, run_id: str, index: int, hotkey: str
) -> LatePanelRow | None:
    """One assignment's late panel (None: no late verdict opened one)."""
    return next((p for p in late_panels(conn, run_id, index) if p.hotkey == hotkey), None)


def open_late_panel(conn: sqlite3.Connection, run_id: str, panel: LatePanelRow) -> None:
    """Store an assignment's late panel (once: a stored one stays)."""
    conn.execute(
        "INSERT OR IGNORE INTO late_panels (run_id, round, hotkey, opened_beacon_round,"
        " close_round, jury) VALUES (?, ?, ?, ?, ?, ?)",
        (
            run_id,
            panel.round,
            panel.hotkey,
            panel.opened_beacon_round,
            panel.close_round,
            json.dumps(sorted(panel.jury)),
        ),
    )
