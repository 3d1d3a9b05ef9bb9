"""Persistent replay protection: each (signer, nonce) is accepted once until it expires.

Backed by SQLite (WAL) so a restarted service still refuses envelopes it accepted
before the crash. An entry can be pruned once its expiry round has passed, because
:func:`hypertrain.protocol.envelope.open_envelope` refuses expired envelopes anyway.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from hypertrain.protocol.errors import ReplayError
from hypertrain.protocol.sqlite import open_database

_SCHEMA = """
CREATE TABLE IF NOT EXISTS seen_nonces (
    signer TEXT NOT NULL,
    nonce TEXT NOT NULL,
    expiry_round INTEGER NOT NULL,
    PRIMARY KEY (signer, nonce)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS seen_nonces_expiry ON seen_nonces (expiry_round);
"""


class ReplayStore:
    """A store of seen (signer, nonce) pairs; safe to share between threads."""

    def __init__(self, path: Path | str) -> None:
        self._lock = threading.Lock()
        self._conn = open_database(path, synchronous="FULL")
        self._conn.executescript(_SCHEMA)

    def record(self, signer: str, nonce: str, expiry_round: int) -> None:
        """Record the pair, or raise :class:`ReplayError` if it was seen before."""
        with self._lock:
            try:
                self._conn.execute(
                    "INSERT INTO seen_nonces (signer, nonce, expiry_round) VALUES (?, ?, ?)",
                    (signer, nonce, expiry_round),
                )
            except sqlite3.IntegrityError as exc:
                raise ReplayError(f"nonce {nonce!r} from {signer} was already used") from exc

    def seen(self, signer: str, nonce: str) -> bool:
        with self._lock:
            row = self._conn.execute(
                "SELECT 1 FROM seen_nonces WHERE signer = ? AND nonce = ?", (signer, nonce)
            ).fetchone()
        return row is not None

    def prune(self, current_round: int) -> int:
        """Forget pairs whose envelopes have expired; returns how many were removed."""
        with self._lock:
            cur = self._conn.execute(
                "DELETE FROM seen_nonces WHERE expiry_round < ?", (current_round,)
            )
        return cur.rowcount

    def close(self) -> None:
        with self._lock:
            self._conn.close()
