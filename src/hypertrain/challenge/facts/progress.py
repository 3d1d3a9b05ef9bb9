"""Where the service stands in time, read the same way by every resource: the next round
of a run to open (:func:`next_round`: a leave and a honeypot period both take effect
from it) and a verified beacon round by its number (:func:`beacon_round`: the audit
selection and a competition cycle both draw their randomness from it)."""

from __future__ import annotations

import sqlite3

from hypertrain.challenge.ports import BeaconRound
from hypertrain.challenge.state import ServiceState
from hypertrain.challenge.store import rounds_storage


def next_round(conn: sqlite3.Connection, run_id: str) -> int:
    """The index of the next round to open (0 before the first)."""
    last = rounds_storage.last_round(conn, run_id)
    return 0 if last is None else last[0] + 1


def beacon_round(state: ServiceState, number: int) -> BeaconRound:
    """A verified beacon round: the current one, a stored one, or fetched (blocking)."""
    current = state.current
    if current is not None and current.round == number:
        return current
    row = rounds_storage.beacon(state.conn, number)
    if row is not None:
        return BeaconRound(number, row.randomness, row.signature)
    return state.beacon.get(number)
