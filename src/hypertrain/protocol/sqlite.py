"""The one way services open their SQLite files: WAL, explicit transactions, a busy timeout.

Every state store in the system (the replay store, the beacon cache, the ledger, the
challenge service) is a SQLite file written by one process and read by others.
``open_database`` sets the pragmas they all rely on; ``transaction`` is the
``BEGIN IMMEDIATE … COMMIT`` block that makes each state change all-or-nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal


def open_database(
    path: Path | str,
    *,
    synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
    busy_timeout_ms: int = 5000,
    foreign_keys: bool = False,
) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), shareable by threads.

    ``synchronous=FULL`` makes every commit durable across power loss (money, nonces);
    ``NORMAL`` survives a process crash, which is enough for caches and most state.
    The path ``":memory:"`` opens a private in-memory database (no WAL).
    """
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        if str(path) != ":memory:":
            conn.execute("PRAGMA journal_mode=WAL")  # fails here on a file that is not SQLite
        conn.execute(f"PRAGMA synchronous={synchronous}")
        if foreign_keys:
            conn.execute("PRAGMA foreign_keys=ON")
    except sqlite3.Error:
        conn.close()
        raise
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``; any exception rolls the whole block back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def write_generation(conn: sqlite3.Connection) -> tuple[int, int] | None:
    """A value that changes with every write the database sees, or ``None`` inside a
    transaction (its uncommitted rows are no generation: they may yet roll back).

    ``total_changes`` counts this connection's inserted, updated and deleted rows (it
    only grows, a rollback included); ``PRAGMA data_version`` changes when another
    connection commits. Memoize a pure read of the database by this pair: while it is
    unchanged, the read's answer is too.
    """
    if conn.in_transaction:
        return None
    (version,) = conn.execute("PRAGMA data_version").fetchone()
    return conn.total_changes, int(version)
