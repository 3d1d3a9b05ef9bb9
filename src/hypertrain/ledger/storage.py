"""SQLite storage: connection settings, versioned migrations, the transaction helper.

The database runs in WAL mode with ``synchronous=FULL``: a commit is durable once it
returns, and a process killed at any moment leaves either the whole transaction or
none of it. The schema only ever moves forward through the numbered steps in
:data:`MIGRATIONS`; ``schema_version`` records the last applied step. A file written
by newer code (a higher version) is refused rather than guessed at.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from hypertrain.ledger.errors import LedgerStorageError
from hypertrain.protocol.sqlite import open_database, transaction

LEDGER_FILENAME: Final = "ledger.sqlite3"

_V1: Final = (
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        pool_per_round INTEGER NOT NULL,
        vesting_rounds INTEGER NOT NULL,
        clock INTEGER NOT NULL DEFAULT -1,
        minted INTEGER NOT NULL DEFAULT 0,
        burned INTEGER NOT NULL DEFAULT 0,
        nominal_mark INTEGER NOT NULL DEFAULT 0,
        head_seq INTEGER NOT NULL DEFAULT 0,
        head_hash TEXT NOT NULL
    )""",
    """CREATE TABLE journal (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        point INTEGER NOT NULL,
        hotkey TEXT NOT NULL,
        amount INTEGER NOT NULL,
        body BLOB NOT NULL,
        hash TEXT NOT NULL,
        PRIMARY KEY (run_id, seq),
        UNIQUE (run_id, kind, point, hotkey)
    )""",
    """CREATE TABLE rounds (
        run_id TEXT NOT NULL,
        round INTEGER NOT NULL,
        epoch INTEGER NOT NULL,
        pool INTEGER NOT NULL,
        unallocated INTEGER NOT NULL,
        inputs_hash TEXT NOT NULL,
        PRIMARY KEY (run_id, round)
    )""",
    """CREATE TABLE escrows (
        run_id TEXT NOT NULL,
        round INTEGER NOT NULL,
        hotkey TEXT NOT NULL,
        amount INTEGER NOT NULL,
        released INTEGER NOT NULL DEFAULT 0,
        closed INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (run_id, round, hotkey)
    )""",
    """CREATE TABLE balances (
        run_id TEXT NOT NULL,
        hotkey TEXT NOT NULL,
        escrowed INTEGER NOT NULL DEFAULT 0,
        vested INTEGER NOT NULL DEFAULT 0,
        paid INTEGER NOT NULL DEFAULT 0,
        burned INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (run_id, hotkey)
    )""",
    """CREATE TABLE weights (
        epoch INTEGER PRIMARY KEY,
        answer BLOB NOT NULL,
        answer_sha256 TEXT NOT NULL
    )""",
)
_V2: Final = (
    "CREATE INDEX escrows_open ON escrows (run_id, closed, hotkey)",
    "CREATE INDEX balances_vested ON balances (run_id, vested)",
    "CREATE INDEX balances_hotkey ON balances (hotkey)",
)
# Probation holds: the first round after the hotkey's probation (0 = not held).
_V3: Final = (
    "ALTER TABLE escrows ADD COLUMN held_until INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX escrows_held ON escrows (run_id, held_until)",
)

# Dispute bonds: the part of an escrow a bond locks (it does not vest while locked) and
# the part a lost dispute burned; one row per bond, numbered per run.
_V4: Final = (
    "ALTER TABLE escrows ADD COLUMN locked INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE escrows ADD COLUMN forfeited INTEGER NOT NULL DEFAULT 0",
    """CREATE TABLE bonds (
        run_id TEXT NOT NULL,
        bond INTEGER NOT NULL,
        hotkey TEXT NOT NULL,
        dispute TEXT NOT NULL,
        amount INTEGER NOT NULL,
        rounds TEXT NOT NULL,
        state TEXT NOT NULL,
        PRIMARY KEY (run_id, bond),
        UNIQUE (run_id, dispute)
    )""",
)

# Ordered, append-only: step i+1 upgrades a version-i database. Never edit a shipped step.
MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (_V1, _V2, _V3, _V4)
SCHEMA_VERSION: Final = len(MIGRATIONS)


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) a ledger database and bring its schema up to date."""
    try:
        conn = open_database(path, synchronous="FULL", busy_timeout_ms=10000, foreign_keys=True)
    except sqlite3.DatabaseError as exc:
        raise LedgerStorageError(f"{path} is not a usable ledger database: {exc}") from exc
    try:
        migrate(conn)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise LedgerStorageError(f"{path} is not a usable ledger database: {exc}") from exc
    except LedgerStorageError:
        conn.close()
        raise
    return conn


def schema_version(conn: sqlite3.Connection) -> int:
    row = conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name='schema_version'"
    ).fetchone()
    if row is None:
        return 0
    got = conn.execute("SELECT version FROM schema_version").fetchone()
    return int(got[0]) if got else 0


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Apply each missing step in its own transaction; return the resulting version."""
    with transaction(conn):
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        if conn.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == 0:
            conn.execute("INSERT INTO schema_version (version) VALUES (0)")
    current = schema_version(conn)
    if current > SCHEMA_VERSION:
        raise LedgerStorageError(
            f"ledger schema version {current} is newer than this code ({SCHEMA_VERSION})"
        )
    for version in range(current + 1, target + 1):
        with transaction(conn):
            for statement in MIGRATIONS[version - 1]:
                conn.execute(statement)
            conn.execute("UPDATE schema_version SET version = ?", (version,))
    return max(current, target)
