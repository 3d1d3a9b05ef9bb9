"""Storage of the platform's records: each epoch's ``get_weights`` answer (stored once,
repeated byte for byte) and the last metagraph snapshot."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import NamedTuple


class Departure(NamedTuple):
    """A hotkey that left between two snapshots: its old uid, its new one if it came back
    under another, and the epoch of the snapshot that showed it."""

    hotkey: str
    old_uid: int
    new_uid: int | None
    noticed_epoch: int


def answer(conn: sqlite3.Connection, epoch: int) -> bytes | None:
    """The stored answer of ``epoch`` (None: not answered yet)."""
    row = conn.execute("SELECT body FROM weights_answers WHERE epoch = ?", (epoch,)).fetchone()
    return None if row is None else bytes(row["body"])


def keep_answer(conn: sqlite3.Connection, epoch: int, body: bytes) -> bytes:
    """Store ``body`` as the answer of ``epoch`` unless one is stored; the stored one."""
    conn.execute("INSERT OR IGNORE INTO weights_answers VALUES (?, ?)", (epoch, body))
    stored = answer(conn, epoch)
    assert stored is not None  # just written, or written before
    return stored


def latest_answer(conn: sqlite3.Connection) -> bytes | None:
    """The answer of the newest epoch answered so far."""
    row = conn.execute("SELECT body FROM weights_answers ORDER BY epoch DESC LIMIT 1").fetchone()
    return None if row is None else bytes(row["body"])


def snapshot(conn: sqlite3.Connection) -> str | None:
    """The last metagraph snapshot stored (JSON), if any."""
    row = conn.execute("SELECT snapshot FROM metagraph WHERE id = 1").fetchone()
    return None if row is None else str(row["snapshot"])


def save_snapshot(conn: sqlite3.Connection, text: str, fetched_at: float) -> None:
    conn.execute("INSERT OR REPLACE INTO metagraph VALUES (1, ?, ?)", (text, fetched_at))


def departed(conn: sqlite3.Connection) -> frozenset[str]:
    """Hotkeys that left the metagraph since an earlier snapshot, not burned yet."""
    return frozenset(r["hotkey"] for r in conn.execute("SELECT hotkey FROM metagraph_departures"))


def note_departures(conn: sqlite3.Connection, left: Iterable[Departure]) -> None:
    """Keep departures until the next epoch's answer burns them (the first noted stays)."""
    conn.executemany(
        "INSERT OR IGNORE INTO metagraph_departures VALUES (?, ?, ?, ?)",
        [tuple(d) for d in left],
    )


def clear_departures(conn: sqlite3.Connection) -> None:
    """The departures noted so far are consumed (an epoch's answer burned them)."""
    conn.execute("DELETE FROM metagraph_departures")
