"""Storage of competition mode's tables: competitions, commitments and reveals, cycles,
scores and standings. (The intake, cycles and views still hold their own SQL for now;
see ``tests/test_layering.py``.)"""

from __future__ import annotations

import sqlite3


def submitters(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(competition id, hotkey) of everyone who committed to any competition."""
    rows = conn.execute("SELECT DISTINCT competition_id, hotkey FROM compete_commits")
    return [(r["competition_id"], r["hotkey"]) for r in rows]
