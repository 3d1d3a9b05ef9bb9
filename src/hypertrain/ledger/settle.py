"""Round settlement, vesting and burns: the operations that move value between buckets.

Settling a final round mints its pool, splits it by largest remainder into escrows,
burns what nobody can receive, advances the run's vesting clock to the highest settled
round and vests every open escrow up to its schedule. An escrow of a hotkey still in
probation is *held*: it records the first round after the probation (``held_until``)
and its schedule starts from there (:func:`~hypertrain.ledger.split.vest_start`). A
burn (fault or deregistration) takes everything of a miner in a run that has not been
paid. A dispute bond (:mod:`hypertrain.ledger.bonds`) caps what an escrow may vest
while it is locked. All of it runs inside the
caller's transaction, so a crash leaves the round either fully settled or untouched.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass

from hypertrain.ledger.split import largest_remainder, vest_start, vested_prefix
from hypertrain.ledger.writer import RunConfig, add_balance, append

OPEN, BURNED, VESTED = 0, 1, 2  # escrows.closed


@dataclass(frozen=True)
class SettleResult:
    """What a settlement did (or, on a repeat, had done): rewards and the burned rest."""

    run_id: str
    round: int
    rewards: dict[str, int]
    unallocated: int
    applied: bool


def settle(
    conn: sqlite3.Connection,
    run: RunConfig,
    round_: int,
    accepted: Mapping[str, int],
    epoch: int,
    held: Mapping[str, int],
) -> SettleResult:
    """Mint, split, escrow and burn the unallocated part of one round (first call only).

    ``held`` maps hotkeys still in probation to the first round after it; their
    escrows carry that round and vest only from there.
    """
    rewards = largest_remainder(run.pool_per_round, accepted)
    unallocated = run.pool_per_round - sum(rewards.values())
    rid = run.run_id
    total_tokens = sum(accepted.values())
    append(conn, rid, "mint", round_, amount=run.pool_per_round, epoch=epoch,
           detail={"miners": len(accepted), "tokens": total_tokens})  # fmt: skip
    for hotkey, amount in rewards.items():
        detail = {"tokens": accepted[hotkey]}
        if hotkey in held:
            detail["held_until"] = held[hotkey]
        append(conn, rid, "escrow", round_, hotkey=hotkey, amount=amount, epoch=epoch,
               detail=detail)  # fmt: skip
    conn.executemany(
        "INSERT INTO escrows (run_id, round, hotkey, amount, closed, held_until)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [(rid, round_, h, a, OPEN if a else VESTED, held.get(h, 0)) for h, a in rewards.items()],
    )
    conn.executemany(
        "INSERT INTO balances (run_id, hotkey, escrowed) VALUES (?, ?, ?) ON CONFLICT"
        " (run_id, hotkey) DO UPDATE SET escrowed = escrowed + excluded.escrowed",
        [(rid, h, a) for h, a in rewards.items()],
    )
    if unallocated:
        append(conn, rid, "burn_unallocated", round_, amount=unallocated, epoch=epoch,
               reason="no eligible miner" if not total_tokens else "rounding")  # fmt: skip
    clock = max(run.clock, round_)
    conn.execute(
        "UPDATE runs SET minted = minted + ?, burned = burned + ?, clock = ? WHERE run_id = ?",
        (run.pool_per_round, unallocated, clock, rid),
    )
    vest(conn, run, clock, round_, epoch)
    return SettleResult(rid, round_, rewards, unallocated, applied=True)


def vest(conn: sqlite3.Connection, run: RunConfig, clock: int, point: int, epoch: int) -> None:
    """Bring every open escrow of the run up to its schedule at ``clock``."""
    rows = conn.execute(
        "SELECT round, hotkey, amount, released, held_until, locked, forfeited FROM escrows"
        " WHERE run_id = ?1 AND closed = ?2 AND round < ?3 AND held_until - 1 < ?3",
        (run.run_id, OPEN, clock),
    ).fetchall()
    deltas: dict[str, list[list[int]]] = {}
    for w, hotkey, amount, released, held_until, locked, forfeited in rows:
        due = due_now(run, clock, w, amount, held_until, locked, forfeited)
        if due > released:
            deltas.setdefault(hotkey, []).append([w, due - released])
            update_released(conn, run.run_id, w, hotkey, due)
    append_vests(conn, run, deltas, point, epoch)


def due_now(
    run: RunConfig, clock: int, w: int, amount: int, held_until: int, locked: int, forfeited: int
) -> int:
    """What an escrow's schedule has released at ``clock``, never into a bond's part."""
    due = vested_prefix(amount, run.vesting_rounds, clock - vest_start(w, held_until))
    return min(due, amount - locked - forfeited)


def update_released(conn: sqlite3.Connection, run_id: str, w: int, hotkey: str, due: int) -> None:
    """Set an escrow's released amount; it is fully vested once nothing is left or locked."""
    conn.execute(
        "UPDATE escrows SET released = ?1, closed = CASE WHEN ?1 = amount - forfeited"
        " AND locked = 0 THEN ?2 ELSE ?3 END WHERE run_id = ?4 AND round = ?5 AND hotkey = ?6",
        (due, VESTED, OPEN, run_id, w, hotkey),
    )


def append_vests(
    conn: sqlite3.Connection,
    run: RunConfig,
    deltas: dict[str, list[list[int]]],
    point: int,
    epoch: int,
) -> None:
    for hotkey in sorted(deltas):
        pairs = sorted(deltas[hotkey])
        total = sum(d for _, d in pairs)
        append(conn, run.run_id, "vest", point, hotkey=hotkey, amount=total, epoch=epoch,
               detail={"rounds": pairs})  # fmt: skip
        add_balance(conn, run.run_id, hotkey, escrowed=-total, vested=total)


def burn_all(
    conn: sqlite3.Connection,
    run_id: str,
    hotkey: str,
    kind: str,
    point: int,
    epoch: int,
    reason: str,
) -> int:
    """Burn every unpaid unit of ``hotkey`` in the run (escrow and vested); return it."""
    rows = conn.execute(
        "SELECT round, amount - released - forfeited FROM escrows"
        " WHERE run_id = ? AND hotkey = ? AND closed = ? ORDER BY round",
        (run_id, hotkey, OPEN),
    ).fetchall()
    pairs = [[int(w), int(d)] for w, d in rows]
    from_escrow = sum(d for _, d in pairs)
    got = conn.execute(
        "SELECT vested FROM balances WHERE run_id = ? AND hotkey = ?", (run_id, hotkey)
    ).fetchone()
    from_vested = int(got[0]) if got else 0
    total = from_escrow + from_vested
    append(
        conn, run_id, "fault" if kind == "fault" else "deregister", point, hotkey=hotkey,
        amount=total, epoch=epoch, reason=reason,
        detail={"from_escrow": from_escrow, "from_vested": from_vested, "rounds": pairs},
    )  # fmt: skip
    conn.execute(
        "UPDATE escrows SET closed = ?, locked = 0 WHERE run_id = ? AND hotkey = ? AND closed = ?",
        (BURNED, run_id, hotkey, OPEN),
    )
    # a bond still locked burns with the rest; its dispute can no longer move it
    conn.execute(
        "UPDATE bonds SET state = 'consumed' WHERE run_id = ? AND hotkey = ? AND state = 'locked'",
        (run_id, hotkey),
    )
    add_balance(conn, run_id, hotkey, escrowed=-from_escrow, vested=-from_vested, burned=total)
    return total


def release(
    conn: sqlite3.Connection, run: RunConfig, round_: int, hotkey: str, epoch: int, until: int
) -> bool:
    """End a hold that has not started vesting: it vests from the next settlement on
    (or from ``until``, if later)."""
    row = conn.execute(
        "SELECT held_until FROM escrows"
        " WHERE run_id = ? AND round = ? AND hotkey = ? AND closed = ?",
        (run.run_id, round_, hotkey, OPEN),
    ).fetchone()
    until = max(run.clock + 1, until)
    if row is None or int(row[0]) <= until:
        return False  # nothing held, or it vests from the next settlement already
    append(conn, run.run_id, "release", round_, hotkey=hotkey, epoch=epoch,
           detail={"held_until": until})  # fmt: skip
    conn.execute(
        "UPDATE escrows SET held_until = ? WHERE run_id = ? AND round = ? AND hotkey = ?",
        (until, run.run_id, round_, hotkey),
    )
    return True
