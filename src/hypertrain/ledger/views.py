"""Read-only views of the materialised balances, for the dashboard and the CLI.

``held`` is the part of ``escrowed`` waiting for a probation to end: escrows whose
vesting has not started because the run's clock has not reached ``held_until``.
It is not a separate bucket, so conservation reads the same with or without holds.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final

from hypertrain.ledger.errors import UnknownHotkeyError
from hypertrain.ledger.writer import load_run


@dataclass(frozen=True)
class Balance:
    """One miner's value in one run, by bucket (base units)."""

    run_id: str
    hotkey: str
    escrowed: int
    vested: int
    paid: int
    burned: int
    held: int = 0


@dataclass(frozen=True)
class RunSummary:
    """A run's totals: ``minted == escrowed + vested + paid + burned`` always."""

    run_id: str
    pool_per_round: int
    vesting_rounds: int
    rounds_settled: int
    last_round: int | None
    miners: int
    minted: int
    escrowed: int
    vested: int
    paid: int
    burned: int
    journal_entries: int
    head_hash: str
    held: int = 0


_HELD: Final = (
    "SELECT COALESCE(SUM(e.amount - e.released), 0) FROM escrows e JOIN runs r"
    " ON r.run_id = e.run_id WHERE e.run_id = ?1 AND (?2 IS NULL OR e.hotkey = ?2)"
    " AND e.closed = 0 AND e.held_until > r.clock"
)


def balance(conn: sqlite3.Connection, run_id: str, hotkey: str) -> Balance:
    load_run(conn, run_id)
    row = conn.execute(
        "SELECT escrowed, vested, paid, burned FROM balances WHERE run_id = ? AND hotkey = ?",
        (run_id, hotkey),
    ).fetchone()
    if row is None:
        raise UnknownHotkeyError(f"hotkey {hotkey!r:.70} has no history in run {run_id!r}")
    held = int(conn.execute(_HELD, (run_id, hotkey)).fetchone()[0])
    escrowed, vested, paid, burned = (int(x) for x in row)
    return Balance(run_id, hotkey, escrowed, vested, paid, burned, held)


def summary(conn: sqlite3.Connection, run_id: str) -> RunSummary:
    run = load_run(conn, run_id)
    minted, burned, head_seq, head_hash = conn.execute(
        "SELECT minted, burned, head_seq, head_hash FROM runs WHERE run_id = ?", (run_id,)
    ).fetchone()
    miners, esc, ves, paid, burned_hk = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(escrowed), 0), COALESCE(SUM(vested), 0),"
        " COALESCE(SUM(paid), 0), COALESCE(SUM(burned), 0) FROM balances WHERE run_id = ?",
        (run_id,),
    ).fetchone()
    settled, last = conn.execute(
        "SELECT COUNT(*), MAX(round) FROM rounds WHERE run_id = ?", (run_id,)
    ).fetchone()
    return RunSummary(
        run_id=run_id, pool_per_round=run.pool_per_round, vesting_rounds=run.vesting_rounds,
        rounds_settled=int(settled), last_round=None if last is None else int(last),
        miners=int(miners), minted=int(minted), escrowed=int(esc), vested=int(ves),
        paid=int(paid), burned=int(burned) + int(burned_hk), journal_entries=int(head_seq),
        head_hash=str(head_hash), held=int(conn.execute(_HELD, (run_id, None)).fetchone()[0]),
    )  # fmt: skip
