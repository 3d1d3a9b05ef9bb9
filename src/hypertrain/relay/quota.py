"""Per-hotkey, per-window byte accounting for uploads (SQLite, survives restarts).

The ``round`` column is the relay's quota window (its own beacon round divided by
``quota_window_rounds``), never the round an uploader claims.

Each (hotkey, round, blob) is counted once, so an idempotent re-upload costs nothing.
A reservation is taken before the bytes are streamed, so concurrent uploads cannot
together pass the limit, and released if the upload is refused.
"""

from __future__ import annotations

import threading
from pathlib import Path

from hypertrain.protocol.sqlite import open_database
from hypertrain.relay.errors import QuotaError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS uploads (
    signer TEXT NOT NULL,
    round INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    PRIMARY KEY (signer, round, sha256)
) WITHOUT ROWID;
"""


class QuotaBook:
    """Bytes accepted per (hotkey, round); thread-safe."""

    def __init__(self, path: Path | str) -> None:
        self._lock = threading.Lock()
        self._conn = open_database(path, synchronous="FULL")
        self._conn.executescript(_SCHEMA)

    def used(self, signer: str, round_: int) -> int:
        with self._lock:
            return self._used(signer, round_)

    def _used(self, signer: str, round_: int) -> int:
        row = self._conn.execute(
            "SELECT COALESCE(SUM(size), 0) FROM uploads WHERE signer = ? AND round = ?",
            (signer, round_),
        ).fetchone()
        return int(row[0])

    def reserve(self, signer: str, round_: int, sha256: str, size: int, limit: int) -> bool:
        """Count the blob against the signer's round; False if it was already counted."""
        with self._lock:
            known = self._conn.execute(
                "SELECT 1 FROM uploads WHERE signer = ? AND round = ? AND sha256 = ?",
                (signer, round_, sha256),
            ).fetchone()
            if known is not None:
                return False
            used = self._used(signer, round_)
            if used + size > limit:
                raise QuotaError(
                    "round_quota_exceeded",
                    f"{signer} has {used} bytes in round {round_}; {size} more would pass"
                    f" the limit of {limit}",
                )
            self._conn.execute(
                "INSERT INTO uploads (signer, round, sha256, size) VALUES (?, ?, ?, ?)",
                (signer, round_, sha256, size),
            )
            return True

    def release(self, signer: str, round_: int, sha256: str) -> None:
        """Undo a reservation whose upload was refused."""
        with self._lock:
            self._conn.execute(
                "DELETE FROM uploads WHERE signer = ? AND round = ? AND sha256 = ?",
                (signer, round_, sha256),
            )

    def close(self) -> None:
        with self._lock:
            self._conn.close()
