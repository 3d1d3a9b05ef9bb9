"""Where the service stands in time, read the same way by every resource: the next round
of a run to open (:func:`next_round`: a leave and a honeypot period both take effect
from it) and a verified beacon round by its number (:func:`beacon_round`: the audit
selection and a competition cycle both draw their randomness from it). Each takes what
it reads: the connection, and for a beacon round the beacon and its verified round."""

from __future__ import annotations

import sqlite3

from hypertrain.challenge.ports import BeaconRound, BeaconSource
from hypertrain.challenge.store import rounds_storage


def next_round(conn: sqlite3.Connection, run_id: str) -> int:
    """The index of the next round to open (0 before the first)."""
    last = rounds_storage.last_round(conn, run_id)
    return 0 if last is None else last[0] + 1


def beacon_round(
    conn: sqlite3.Connection, beacon: BeaconSource, current: BeaconRound | None, number: int
) -> BeaconRound:
    """A verified beacon round: ``current`` (the service's latest), a stored one, or
    fetched from ``beacon`` (blocking)."""
    if current is not None and current.round == number:
        return current
    row = rounds_storage.beacon(conn, number)
    if row is not None:
        return BeaconRound(number, row.randomness, row.signature)
    return beacon.get(number)
