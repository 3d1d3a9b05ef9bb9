"""Storage of competition mode's tables: competitions, commitments and reveals, cycles,
scores and standings. (The intake, cycles and views still hold their own SQL for now;
see ``tests/test_layering.py``.)"""

from __future__ import annotations

import sqlite3


def submitters(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(competition id, hotkey) of everyone who committed to any competition."""
    rows = conn.execute("SELECT DISTINCT competition_id, hotkey FROM compete_commits")
    return [(r["competition_id"], r["hotkey"]) for r in rows]


def latest_verdicts(conn: sqlite3.Connection, cid: str) -> dict[tuple[str, str], bool]:
    """(hotkey, model hash) -> whether it counted in the latest settled cycle that scored it."""
    # SQLite takes a bare column of an aggregate query from the row that holds the MAX
    rows = conn.execute(
        "SELECT hotkey, model_sha256, counted, MAX(cycle) FROM compete_results"
        " WHERE competition_id = ? GROUP BY hotkey, model_sha256",
        (cid,),
    )
    return {(r["hotkey"], r["model_sha256"]): bool(r["counted"]) for r in rows}
