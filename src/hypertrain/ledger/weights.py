"""get_weights: what the ledger releases in an epoch, answered once and then frozen.

The first answer for an epoch pays out, per run, every vested-unpaid balance of a
hotkey registered now (journal ``pay`` entries: vested -> paid) and records the run's
full share mass for the epoch (an ``epoch`` entry): the nominal release, i.e. what the
vesting schedule released since the previous answer counting every tranche of every
pool, including tranches that were burned or withheld. Runs combine by summing: a
hotkey's weight is the sum of its payouts over all runs, and the full share mass is the
sum of the runs' masses. The answer's canonical bytes are stored, and every later call
for that epoch returns exactly those bytes. Hotkeys not registered are left out and
their vested value stays withheld (still subject to clawback) until an epoch in which
they are registered again, or until :func:`deregister` burns it.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from hypertrain.ledger.errors import EpochError, JournalError
from hypertrain.ledger.split import vest_start, vested_prefix
from hypertrain.ledger.writer import RunConfig, append, load_run
from hypertrain.protocol.canonical import canonical_bytes, parse_json


@dataclass(frozen=True)
class WeightsAnswer:
    """The integer weights for one epoch; ``canonical`` is what is persisted and served."""

    epoch: int
    weights: dict[str, int]
    full_share_mass: int

    def to_json(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "weights": dict(sorted(self.weights.items())),
            "full_share_mass": self.full_share_mass,
        }

    @property
    def canonical(self) -> bytes:
        return canonical_bytes(self.to_json())

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.canonical).hexdigest()

    @classmethod
    def from_bytes(cls, data: bytes) -> WeightsAnswer:
        doc = parse_json(data)
        if not isinstance(doc, dict) or set(doc) != {"epoch", "weights", "full_share_mass"}:
            raise JournalError("stored weights answer is malformed")
        return cls(int(doc["epoch"]), dict(doc["weights"]), int(doc["full_share_mass"]))


def stored_answer(conn: sqlite3.Connection, epoch: int) -> WeightsAnswer | None:
    row = conn.execute("SELECT answer FROM weights WHERE epoch = ?", (epoch,)).fetchone()
    return None if row is None else WeightsAnswer.from_bytes(bytes(row[0]))


def answer_epoch(
    conn: sqlite3.Connection, epoch: int, registered: Collection[str]
) -> WeightsAnswer:
    """Compute, journal and persist the first answer for ``epoch`` (inside a transaction)."""
    latest = conn.execute("SELECT MAX(epoch) FROM weights").fetchone()[0]
    if latest is not None and epoch < int(latest):
        raise EpochError(f"epoch {epoch} precedes epoch {latest}, which is already answered")
    allowed = frozenset(registered)
    weights: dict[str, int] = {}
    mass = 0
    run_ids = [r[0] for r in conn.execute("SELECT run_id FROM runs ORDER BY run_id")]
    for run_id in run_ids:
        run = load_run(conn, run_id)
        mass += _close_epoch(conn, run, epoch)
        for hotkey, amount in _pay(conn, run_id, epoch, allowed).items():
            weights[hotkey] = weights.get(hotkey, 0) + amount
    answer = WeightsAnswer(epoch, weights, mass)
    conn.execute(
        "INSERT INTO weights (epoch, answer, answer_sha256) VALUES (?, ?, ?)",
        (epoch, answer.canonical, answer.sha256),
    )
    return answer


def _close_epoch(conn: sqlite3.Connection, run: RunConfig, epoch: int) -> int:
    nominal = nominal_release(conn, run)
    mark = int(
        conn.execute("SELECT nominal_mark FROM runs WHERE run_id = ?", (run.run_id,)).fetchone()[0]
    )
    mass = nominal - mark
    append(conn, run.run_id, "epoch", epoch, amount=mass, epoch=epoch,
           detail={"nominal": nominal})  # fmt: skip
    conn.execute("UPDATE runs SET nominal_mark = ? WHERE run_id = ?", (nominal, run.run_id))
    return mass


def _pay(
    conn: sqlite3.Connection, run_id: str, epoch: int, allowed: frozenset[str]
) -> dict[str, int]:
    rows = conn.execute(
        "SELECT hotkey, vested FROM balances WHERE run_id = ? AND vested > 0 ORDER BY hotkey",
        (run_id,),
    ).fetchall()
    paid = {str(h): int(v) for h, v in rows if h in allowed}
    for hotkey, amount in paid.items():
        append(conn, run_id, "pay", epoch, hotkey=hotkey, amount=amount, epoch=epoch)
    conn.executemany(
        "UPDATE balances SET vested = vested - ?, paid = paid + ? WHERE run_id = ? AND hotkey = ?",
        [(a, a, run_id, h) for h, a in paid.items()],
    )
    return paid


def nominal_release(conn: sqlite3.Connection, run: RunConfig) -> int:
    """What the schedule has released in the run so far, counting burned tranches too.

    Held escrows count on their delayed schedule, exactly as the journal replay does.
    """
    v, clock = run.vesting_rounds, run.clock
    horizon = clock - v  # rounds at or before this are fully released
    full = conn.execute(
        "SELECT COALESCE(SUM(pool), 0) FROM rounds WHERE run_id = ? AND round <= ?",
        (run.run_id, horizon),
    ).fetchone()[0]
    total = int(full)
    for w, unallocated in conn.execute(
        "SELECT round, unallocated FROM rounds WHERE run_id = ? AND round > ?",
        (run.run_id, horizon),
    ).fetchall():
        total += vested_prefix(int(unallocated), v, clock - int(w))
    # Escrows whose schedule is not complete: recent ones, and held ones whose vesting
    # starts later than their round (those inside the horizon were counted in full).
    for w, amount, held_until in conn.execute(
        "SELECT round, amount, held_until FROM escrows"
        " WHERE run_id = ?1 AND (round > ?2 OR held_until > ?2 + 1)",
        (run.run_id, horizon),
    ).fetchall():
        due = vested_prefix(int(amount), v, clock - vest_start(int(w), int(held_until)))
        total += due if int(w) > horizon else due - int(amount)
    return total
