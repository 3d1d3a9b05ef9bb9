"""A SQLite cache of verified beacons, so each round is fetched and verified once.

Only beacons that passed :func:`~hypertrain.beacon.verify.verify_beacon` are stored,
keyed by (chain hash, round), so one file can serve several chains. Randomness is
recomputed from the stored signature on read. The connection is shared between
threads behind a lock (the challenge service calls the client from worker threads).
"""

from __future__ import annotations

import threading
from pathlib import Path

from hypertrain.beacon.bls import randomness_of
from hypertrain.beacon.verify import Beacon
from hypertrain.protocol.sqlite import open_database

_SCHEMA = """
CREATE TABLE IF NOT EXISTS beacons (
    chain_hash BLOB NOT NULL,
    round INTEGER NOT NULL,
    signature BLOB NOT NULL,
    PRIMARY KEY (chain_hash, round)
) WITHOUT ROWID
"""


class BeaconCache:
    """Verified beacons by (chain, round). ``path=None`` keeps them in memory only."""

    def __init__(self, path: Path | None) -> None:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        target = ":memory:" if path is None else str(path)
        self._lock = threading.Lock()
        self._conn = open_database(target)
        self._conn.execute(_SCHEMA)

    def get(self, chain_hash: bytes, round_number: int) -> Beacon | None:
        """The cached beacon for a round, or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT signature FROM beacons WHERE chain_hash = ? AND round = ?",
                (chain_hash, round_number),
            ).fetchone()
        if row is None:
            return None
        signature = bytes(row[0])
        return Beacon(round=round_number, signature=signature, randomness=randomness_of(signature))

    def latest(self, chain_hash: bytes) -> Beacon | None:
        """The highest cached round of a chain, or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT round, signature FROM beacons WHERE chain_hash = ? "
                "ORDER BY round DESC LIMIT 1",
                (chain_hash,),
            ).fetchone()
        if row is None:
            return None
        signature = bytes(row[1])
        return Beacon(round=int(row[0]), signature=signature, randomness=randomness_of(signature))

    def put(self, chain_hash: bytes, beacon: Beacon) -> None:
        """Store a beacon that has already been verified for ``chain_hash``."""
        with self._lock:
            self._conn.execute(
                "INSERT OR IGNORE INTO beacons (chain_hash, round, signature) VALUES (?, ?, ?)",
                (chain_hash, beacon.round, beacon.signature),
            )

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> BeaconCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
