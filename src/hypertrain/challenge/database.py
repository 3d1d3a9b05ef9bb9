"""SQLite storage of the service state: one database file in the state directory.

WAL mode with ``synchronous=NORMAL``: a committed transaction survives a killed
process (SIGKILL), which is the failure the service must ride out. The schema is
versioned (:mod:`hypertrain.challenge.migrations`, one module per version):
``MIGRATIONS[i]`` takes the database from version ``i`` to ``i + 1`` and runs inside one
transaction, so an interrupted upgrade leaves the old version. Uniqueness that the
protocol relies on (one commit per island per round, one verdict per auditor per
assignment, one merge per round, one weights answer per epoch) is enforced by the
schema's primary keys, not only by checks in Python. This module also owns the replay
nonces (``seen_nonces``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from hypertrain.challenge.migrations import MIGRATIONS
from hypertrain.protocol.sqlite import open_database, transaction

DB_NAME: Final = "challenge.sqlite"
# The tables whose sizes the metrics report.
COUNTED: Final = ("runs", "rounds", "roster", "commits", "audits", "verdicts", "dispute_games",
                  "merges")  # fmt: skip


def connect(state_dir: Path) -> sqlite3.Connection:
    """Open (creating if needed) the service database and bring it to the latest schema."""
    state_dir.mkdir(parents=True, exist_ok=True)
    conn = open_database(state_dir / DB_NAME, foreign_keys=True)
    conn.row_factory = sqlite3.Row
    migrate(conn)
    return conn


def reader(state_dir: Path) -> sqlite3.Connection:
    """A second connection to the service database for lock-free reads of final records
    (WAL: it never waits for the writer and sees only committed rows)."""
    conn = open_database(state_dir / DB_NAME)
    conn.row_factory = sqlite3.Row
    return conn


def row_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Rows stored in each of the :data:`COUNTED` tables."""
    return {
        table: int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])  # noqa: S608
        for table in COUNTED
    }


def nonce_used(conn: sqlite3.Connection, run_id: str, signer: str, nonce: str) -> bool:
    """Whether a signer's nonce was already burned in a run (replay protection)."""
    row = conn.execute(
        "SELECT 1 FROM seen_nonces WHERE run_id = ? AND signer = ? AND nonce = ?",
        (run_id, signer, nonce),
    ).fetchone()
    return row is not None


def burn_nonce(
    conn: sqlite3.Connection, run_id: str, signer: str, nonce: str, expiry_round: int
) -> None:
    """Record a nonce as used (inside the caller's write transaction); a second burn of
    the same nonce raises ``sqlite3.IntegrityError``."""
    conn.execute(
        "INSERT INTO seen_nonces VALUES (?, ?, ?, ?)", (run_id, signer, nonce, expiry_round)
    )


def prune_nonces(conn: sqlite3.Connection, before_round: int) -> int:
    """Forget the nonces of envelopes that expired before ``before_round``; how many."""
    return conn.execute("DELETE FROM seen_nonces WHERE expiry_round < ?", (before_round,)).rowcount


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every pending migration; returns the resulting version."""
    version = schema_version(conn)
    if version > len(MIGRATIONS):
        raise RuntimeError(
            f"database schema version {version} is newer than this code ({len(MIGRATIONS)})"
        )
    for target in range(version + 1, len(MIGRATIONS) + 1):
        with transaction(conn):
            for statement in _statements(MIGRATIONS[target - 1]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version={target}")
    return schema_version(conn)


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]
