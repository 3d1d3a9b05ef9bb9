"""Dispute bonds: locked from a miner's escrow, then burned (dispute lost) or returned (won).

A bond is numbered per run (the journal point of its three entries). ``bond_lock``
takes the amount from the miner's open escrows, newest first, out of the part that
has not vested and is not already locked; each row records what is locked on it, and
while it is locked that part does not vest (the row's schedule is capped at
``amount - locked - forfeited``). The value stays in the ``escrowed`` bucket.
``bond_burn`` moves the locked parts to ``forfeited`` and burns them. ``bond_return``
ends the lock and, in the same entry, vests what the schedule released meanwhile, so
every open escrow is on its schedule after every entry. A fault or deregistration
while a bond is locked burns it with everything else (the bond is then ``consumed``
and its dispute moves nothing). Everything runs inside the caller's transaction.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from hypertrain.ledger.errors import BondError
from hypertrain.ledger.settle import OPEN, due_now, update_released
from hypertrain.ledger.writer import RunConfig, add_balance, append


@dataclass(frozen=True)
class Bond:
    """One dispute bond: its number, owner, dispute, amount and where it is locked."""

    bond: int
    hotkey: str
    dispute: str
    amount: int
    rounds: list[list[int]]
    state: str  # locked, burned, returned, consumed


def find(conn: sqlite3.Connection, run_id: str, dispute: str) -> Bond | None:
    row = conn.execute(
        "SELECT bond, hotkey, dispute, amount, rounds, state FROM bonds"
        " WHERE run_id = ? AND dispute = ?",
        (run_id, dispute),
    ).fetchone()
    if row is None:
        return None
    return Bond(int(row[0]), str(row[1]), str(row[2]), int(row[3]), json.loads(row[4]), row[5])


def free_escrow(conn: sqlite3.Connection, run_id: str, hotkey: str) -> int:
    """The miner's escrow that a new bond could lock (not vested, not already locked)."""
    row = conn.execute(
        "SELECT COALESCE(SUM(amount - released - locked - forfeited), 0) FROM escrows"
        " WHERE run_id = ? AND hotkey = ? AND closed = ?",
        (run_id, hotkey, OPEN),
    ).fetchone()
    return int(row[0])


def lock(
    conn: sqlite3.Connection, run: RunConfig, hotkey: str, dispute: str, amount: int, epoch: int
) -> Bond:
    """Lock ``amount`` of the miner's escrow for ``dispute`` (newest escrows first)."""
    free = free_escrow(conn, run.run_id, hotkey)
    if free < amount:
        raise BondError(f"a bond of {amount} needs that much unlocked escrow; {hotkey} has {free}")
    rows = conn.execute(
        "SELECT round, amount - released - locked - forfeited FROM escrows"
        " WHERE run_id = ? AND hotkey = ? AND closed = ? ORDER BY round DESC",
        (run.run_id, hotkey, OPEN),
    ).fetchall()
    pairs: list[list[int]] = []
    left = amount
    for w, avail in rows:
        take = min(int(avail), left)
        if take > 0:
            pairs.append([int(w), take])
            left -= take
        if left == 0:
            break
    pairs.sort()
    number = int(
        conn.execute(
            "SELECT COALESCE(MAX(bond), 0) + 1 FROM bonds WHERE run_id = ?", (run.run_id,)
        ).fetchone()[0]
    )
    append(conn, run.run_id, "bond_lock", number, hotkey=hotkey, amount=amount, epoch=epoch,
           detail={"dispute": dispute, "rounds": pairs})  # fmt: skip
    conn.executemany(
        "UPDATE escrows SET locked = locked + ? WHERE run_id = ? AND round = ? AND hotkey = ?",
        [(d, run.run_id, w, hotkey) for w, d in pairs],
    )
    conn.execute(
        "INSERT INTO bonds VALUES (?, ?, ?, ?, ?, ?, 'locked')",
        (run.run_id, number, hotkey, dispute, amount, json.dumps(pairs)),
    )
    return Bond(number, hotkey, dispute, amount, pairs, "locked")


def burn(conn: sqlite3.Connection, run: RunConfig, bond: Bond, epoch: int, reason: str) -> int:
    """The dispute was lost: the locked parts are forfeited and burned."""
    append(conn, run.run_id, "bond_burn", bond.bond, hotkey=bond.hotkey, amount=bond.amount,
           epoch=epoch, reason=reason, detail={"rounds": bond.rounds})  # fmt: skip
    for w, d in bond.rounds:
        conn.execute(
            "UPDATE escrows SET locked = locked - ?, forfeited = forfeited + ?"
            " WHERE run_id = ? AND round = ? AND hotkey = ?",
            (d, d, run.run_id, w, bond.hotkey),
        )
        _close_if_done(conn, run.run_id, w, bond.hotkey)
    add_balance(conn, run.run_id, bond.hotkey, escrowed=-bond.amount, burned=bond.amount)
    _set_state(conn, run.run_id, bond.bond, "burned")
    return bond.amount


def give_back(conn: sqlite3.Connection, run: RunConfig, bond: Bond, epoch: int) -> int:
    """The dispute was won: the lock ends and what its schedule released meanwhile vests."""
    conn.executemany(
        "UPDATE escrows SET locked = locked - ? WHERE run_id = ? AND round = ? AND hotkey = ?",
        [(d, run.run_id, w, bond.hotkey) for w, d in bond.rounds],
    )
    vests: list[list[int]] = []
    for w, _ in bond.rounds:
        amount, released, held_until, locked, forfeited = conn.execute(
            "SELECT amount, released, held_until, locked, forfeited FROM escrows"
            " WHERE run_id = ? AND round = ? AND hotkey = ?",
            (run.run_id, w, bond.hotkey),
        ).fetchone()
        due = due_now(run, run.clock, w, amount, held_until, locked, forfeited)
        if due > released:
            vests.append([w, due - released])
        update_released(conn, run.run_id, w, bond.hotkey, max(due, released))
    total = sum(d for _, d in vests)
    append(conn, run.run_id, "bond_return", bond.bond, hotkey=bond.hotkey, amount=bond.amount,
           epoch=epoch, detail={"rounds": bond.rounds, "vest": vests})  # fmt: skip
    add_balance(conn, run.run_id, bond.hotkey, escrowed=-total, vested=total)
    _set_state(conn, run.run_id, bond.bond, "returned")
    return bond.amount


def _close_if_done(conn: sqlite3.Connection, run_id: str, w: int, hotkey: str) -> None:
    conn.execute(
        "UPDATE escrows SET closed = 2 WHERE run_id = ? AND round = ? AND hotkey = ?"
        " AND closed = ? AND locked = 0 AND released = amount - forfeited",
        (run_id, w, hotkey, OPEN),
    )


def _set_state(conn: sqlite3.Connection, run_id: str, number: int, state: str) -> None:
    conn.execute(
        "UPDATE bonds SET state = ? WHERE run_id = ? AND bond = ?", (state, run_id, number)
    )
