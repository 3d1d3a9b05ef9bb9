"""A small language of random ledger operations, shared by the property and crash tests.

An op is a plain tuple that names runs, hotkeys and rounds by index or offset, so a
sequence can be drawn by hypothesis or by a seeded ``random.Random``. :class:`Driver`
turns ops into ledger calls deterministically: the same sequence applied to the same
ledger always makes the same calls, which is what lets a restarted process replay a
sequence from the start and rely on idempotency for the part already applied.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from hypertrain.ledger import BondError, Ledger
from tests.ledger.conftest import make_hotkeys

RUNS = ("run-a", "run-b")
HOTKEYS = make_hotkeys(5)
Op = tuple[Any, ...]


def random_ops(rng: random.Random, count: int) -> list[Op]:
    ops: list[Op] = []
    for _ in range(count):
        roll = rng.random()
        if roll < 0.5:
            tokens = {rng.randrange(len(HOTKEYS)): rng.randrange(0, 50) for _ in range(3)}
            holds = {rng.randrange(len(HOTKEYS)): rng.randrange(1, 4) for _ in range(2)}
            ops.append(("settle", rng.randrange(2), rng.choice([0, 0, 0, 1, 2]), tokens, holds))
        elif roll < 0.65:
            ops.append(("fault", rng.randrange(2), rng.randrange(4), rng.randrange(5)))
        elif roll < 0.72:
            ops.append(("dereg", rng.randrange(5)))
        elif roll < 0.9:
            ops.append(("weights", rng.getrandbits(5)))
        else:
            ops.append(("tick",))
    return ops


@dataclass
class Driver:
    """Applies ops to a ledger; tracks the next round per run and the current epoch."""

    ledger: Ledger
    epoch: int = 0
    next_round: dict[int, int] = field(default_factory=lambda: {0: 0, 1: 0})
    settled: dict[tuple[int, int], tuple[dict[str, int], dict[str, int]]] = field(
        default_factory=dict
    )
    known: set[tuple[int, str]] = field(default_factory=set)  # (run, hotkey) with history
    # dispute bonds: the ids the ledger refused (shared with a replaying driver, so a
    # refused lock is never attempted again), and the locked ones in order
    bond_refused: set[str] = field(default_factory=set)
    bonds: list[tuple[int, str]] = field(default_factory=list)
    bond_count: int = 0

    def setup(self) -> None:
        self.ledger.create_run(RUNS[0], 1000, 3)
        self.ledger.create_run(RUNS[1], 777, 5)

    def apply(self, op: Op) -> None:
        getattr(self, f"_{op[0]}")(*op[1:])

    def _settle(
        self, run: int, mode: int, tokens: dict[int, int], holds: dict[int, int] | None = None
    ) -> None:
        """``holds`` puts hotkeys on probation for 1..3 more rounds (those with a reward)."""
        if mode == 1 and self.next_round[run] > 0:  # repeat the last settlement exactly
            rnd = self.next_round[run] - 1
            accepted, held = self.settled[(run, rnd)]
        else:
            rnd = self.next_round[run] + (1 if mode == 2 else 0)
            accepted = {HOTKEYS[i]: t for i, t in tokens.items()}
            held = {HOTKEYS[i]: rnd + k for i, k in (holds or {}).items() if HOTKEYS[i] in accepted}
            self.next_round[run] = rnd + 1
        result = self.ledger.settle_round(RUNS[run], rnd, accepted, self.epoch, held=held)
        pool = 1000 if run == 0 else 777
        assert sum(result.rewards.values()) + result.unallocated == pool
        self.settled[(run, rnd)] = (accepted, held)
        self.known |= {(run, h) for h in accepted}

    def _fault(self, run: int, back: int, hotkey: int) -> None:
        # An op the ledger would refuse is skipped, not attempted: whether it is refused
        # depends on what follows it, so replaying the sequence would apply it instead.
        rnd = max(0, self.next_round[run] - back)
        if (run, rnd) in self.settled and (run, HOTKEYS[hotkey]) in self.known:
            self.ledger.record_fault(RUNS[run], rnd, HOTKEYS[hotkey], "test fault", self.epoch)

    def _dereg(self, hotkey: int) -> None:
        if any(h == HOTKEYS[hotkey] for _, h in self.known):
            self.ledger.deregister(HOTKEYS[hotkey], self.epoch)

    def _weights(self, mask: int) -> None:
        registered = [h for i, h in enumerate(HOTKEYS) if mask >> i & 1]
        answer = self.ledger.get_weights(self.epoch, registered)
        assert answer.full_share_mass >= 0
        self.epoch += 1

    def _bond(self, run: int, hotkey: int, amount: int) -> None:
        self.bond_count += 1
        dispute = hashlib.sha256(f"{run}:{self.bond_count}".encode()).hexdigest()
        if dispute in self.bond_refused:
            return
        if (run, HOTKEYS[hotkey]) not in self.known:
            self.bond_refused.add(dispute)
            return
        try:
            self.ledger.lock_bond(RUNS[run], HOTKEYS[hotkey], dispute, amount, self.epoch)
        except BondError:
            self.bond_refused.add(dispute)
            return
        self.bonds.append((run, dispute))

    def _unbond(self, which: int, won: bool) -> None:
        if self.bonds:
            run, dispute = self.bonds[which % len(self.bonds)]
            self.ledger.settle_bond(RUNS[run], dispute, won, self.epoch)

    def _tick(self) -> None:
        self.epoch += 1


def check_invariants(ledger: Ledger) -> None:
    for run in ledger.runs():
        s = ledger.summary(run)
        assert s.minted == s.escrowed + s.vested + s.paid + s.burned
    low = ledger._conn.execute(
        "SELECT MIN(MIN(escrowed, vested, paid, burned)) FROM balances"
    ).fetchone()[0]
    assert low is None or low >= 0
