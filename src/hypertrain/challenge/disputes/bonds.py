"""The bond a dispute locks, or the refusal of a dispute its island cannot pay for.

A dispute holds its round's settlement (every island's pay) until it is decided, so it
must cost its island: it locks the manifest's full ``dispute.bond`` from the island's
free escrow (neither vested nor locked), burned if the dispute is upheld. An island
holding less is refused (``no_bond``, 403), with one exception per run: its first
dispute under the bond, which locks what the island holds (possibly nothing). That one
dispute is a newcomer's defence against a lying auditor (a first-round island has no
escrow, and an undisputed fault would burn everything it ever earns); it lets each
hotkey hold one round once, never round after round. Ledger errors are raised, never
read as no escrow.
"""

from __future__ import annotations

import sqlite3

from hypertrain.challenge.errors import ForbiddenError, LedgerFaultError
from hypertrain.challenge.ports import LedgerPort
from hypertrain.challenge.store import game_storage


def dispute_bond(
    conn: sqlite3.Connection, ledger: LedgerPort, run_id: str, hotkey: str, bond: int
) -> int:
    """What a new dispute of ``hotkey`` locks: ``bond`` (the manifest's), or all the island
    holds for its one dispute under the bond; raises ``no_bond`` once that one is spent."""
    if bond <= 0:
        return 0
    free = ledger.free_escrow(run_id, hotkey)
    if free < 0:  # an impossible answer: a ledger fault, never a bond of nothing
        raise LedgerFaultError(
            f"the ledger says {hotkey} holds {free} of free escrow in run {run_id!r}"
        )
    if free >= bond:
        return bond
    spent = under_bonded(conn, run_id, hotkey, bond)
    if spent is None:
        return free
    raise ForbiddenError(
        f"a dispute locks a bond of {bond} from free escrow; {hotkey} holds {free} and its"
        f" one dispute under the bond in run {run_id!r} was {spent[:16]}",
        code="no_bond",
    )


def under_bonded(conn: sqlite3.Connection, run_id: str, hotkey: str, bond: int) -> str | None:
    """The island's dispute of the run that locked less than ``bond``, if any."""
    for dispute_id in game_storage.list_ids(conn, run_id, hotkey=hotkey):
        view = game_storage.load_view(conn, dispute_id)
        if view is not None and view.bond < bond:
            return dispute_id
    return None
