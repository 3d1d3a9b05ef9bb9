"""Rebuild a run's balances from its journal alone, checking every rule on the way.

:class:`RunReplay` consumes one run's entries in sequence order. It checks the hash
chain, that each natural key appears once, that no balance goes negative and that each
kind obeys its rule (an escrow fits in its round's pool and a probation hold ends
after its round, a vest never runs ahead of its escrow's schedule, a burn matches
what it closes; a dispute bond locks only unvested escrow, and is burned or returned
exactly as locked). :meth:`RunReplay.finish` then checks the
end-of-journal invariants: conservation (minted = escrowed + vested + paid + burned),
each round fully accounted for, and every open escrow exactly on its vesting schedule.
Any violation raises :class:`JournalError`; the replay stops at the first one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypertrain.ledger.errors import JournalError
from hypertrain.ledger.journal import GENESIS, Entry
from hypertrain.ledger.split import vest_start, vested_prefix


@dataclass
class Row:
    """One miner's escrow from one round; ``start`` is where its vesting clock counts from."""

    amount: int
    start: int
    held_until: int = 0
    released: int = 0
    closed: bool = False
    locked: int = 0  # held by a dispute bond: it does not vest while locked
    forfeited: int = 0  # burned by a lost dispute

    @property
    def cap(self) -> int:
        """The most this escrow may have released: its amount less any bond's part."""
        return self.amount - self.locked - self.forfeited


@dataclass
class BondRec:
    hotkey: str
    amount: int
    rounds: list[tuple[int, int]]
    state: str = "locked"


@dataclass
class Bal:
    escrowed: int = 0
    vested: int = 0
    paid: int = 0
    burned: int = 0

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.escrowed, self.vested, self.paid, self.burned)


@dataclass
class RunReplay:
    """The state of one run rebuilt from its journal."""

    run: str
    pool_per_round: int = 0
    vesting_rounds: int = 1
    clock: int = -1
    minted: int = 0
    burned: int = 0
    head_seq: int = 0
    head_hash: str = GENESIS
    rounds: dict[int, list[int]] = field(default_factory=dict)  # round -> [pool, escrowed, unalloc]
    rows: dict[tuple[int, str], Row] = field(default_factory=dict)
    by_round: dict[int, list[Row]] = field(default_factory=dict)
    last_start: dict[int, int] = field(default_factory=dict)  # round -> latest vesting start
    by_hotkey: dict[str, list[Row]] = field(default_factory=dict)
    balances: dict[str, Bal] = field(default_factory=dict)
    keys: set[tuple[str, int, str]] = field(default_factory=set)
    pays: dict[int, dict[str, int]] = field(default_factory=dict)
    masses: dict[int, int] = field(default_factory=dict)
    nominal: int = 0
    bonds: dict[int, BondRec] = field(default_factory=dict)

    def apply(self, entry: Entry) -> None:
        self._check_link(entry)
        handler = getattr(self, f"_on_{entry.kind}")
        handler(entry)
        self.head_seq, self.head_hash = entry.seq, entry.hash

    def _check_link(self, e: Entry) -> None:
        if e.run != self.run:
            raise JournalError(f"entry belongs to run {e.run!r}, not {self.run!r}")
        if e.seq != self.head_seq + 1:
            raise JournalError(f"sequence number {e.seq}, expected {self.head_seq + 1}")
        if e.prev != self.head_hash:
            raise JournalError("previous-hash link is broken (an entry was edited or removed)")
        if (e.kind == "open_run") != (e.seq == 1):
            raise JournalError("open_run must be exactly the first entry")
        key = (e.kind, e.point, e.hotkey)
        if key in self.keys:
            raise JournalError(f"natural key {key} applied twice")
        self.keys.add(key)

    def _bal(self, hotkey: str, create: bool = False) -> Bal:
        if hotkey not in self.balances:
            if not create:
                raise JournalError(f"hotkey {hotkey} has no history in the run")
            self.balances[hotkey] = Bal()
        return self.balances[hotkey]

    def _on_open_run(self, e: Entry) -> None:
        pool, vesting = e.detail.get("pool_per_round"), e.detail.get("vesting_rounds")
        if type(pool) is not int or type(vesting) is not int or pool < 0 or vesting < 1:
            raise JournalError("open_run has an invalid pool or vesting period")
        self.pool_per_round, self.vesting_rounds = pool, vesting

    def _on_mint(self, e: Entry) -> None:
        if e.amount != self.pool_per_round:
            raise JournalError(f"mint of {e.amount} differs from the pool {self.pool_per_round}")
        self.rounds[e.point] = [e.amount, 0, 0]
        self.minted += e.amount
        self.clock = max(self.clock, e.point)

    def _round(self, e: Entry) -> list[int]:
        if e.point not in self.rounds:
            raise JournalError(f"round {e.point} was never minted")
        return self.rounds[e.point]

    def _on_escrow(self, e: Entry) -> None:
        rnd = self._round(e)
        rnd[1] += e.amount
        if rnd[1] + rnd[2] > rnd[0]:
            raise JournalError(f"round {e.point} allocates more than its pool")
        held_until = e.detail.get("held_until", 0)
        if "held_until" in e.detail and (type(held_until) is not int or held_until <= e.point):
            raise JournalError(f"escrow of round {e.point} has an invalid probation hold")
        row = Row(e.amount, vest_start(e.point, held_until), held_until)
        self.rows[(e.point, e.hotkey)] = row
        self.by_round.setdefault(e.point, []).append(row)
        self.last_start[e.point] = max(self.last_start.get(e.point, e.point), row.start)
        self.by_hotkey.setdefault(e.hotkey, []).append(row)
        self._bal(e.hotkey, create=True).escrowed += e.amount

    def _on_burn_unallocated(self, e: Entry) -> None:
        rnd = self._round(e)
        rnd[2] += e.amount
        if rnd[1] + rnd[2] > rnd[0]:
            raise JournalError(f"round {e.point} burns more than its pool")
        self.burned += e.amount

    def _on_vest(self, e: Entry) -> None:
        total = 0
        for rnd, delta in _pairs(e.detail.get("rounds")):
            row = self.rows.get((rnd, e.hotkey))
            if row is None or row.closed or delta <= 0 or row.released + delta > row.cap:
                raise JournalError(f"vest from round {rnd} does not fit its escrow")
            if row.released + delta > self._due(row):
                raise JournalError(f"vest from round {rnd} runs ahead of its schedule")
            row.released += delta
            total += delta
        if total != e.amount:
            raise JournalError("vest amount differs from the sum of its rounds")
        bal = self._bal(e.hotkey)
        bal.escrowed -= e.amount
        bal.vested += e.amount
        self._nonnegative(e.hotkey)

    def _on_fault(self, e: Entry) -> None:
        self._round(e)
        self._burn(e)

    def _on_release(self, e: Entry) -> None:
        row = self.rows.get((e.point, e.hotkey))
        until = e.detail.get("held_until")
        if row is None or row.closed or row.released or e.amount:
            raise JournalError(f"release of round {e.point} names no held escrow")
        if type(until) is not int or until < self.clock + 1 or row.held_until <= until:
            raise JournalError(f"release of round {e.point} does not end a hold at the clock")
        row.held_until, row.start = until, vest_start(e.point, until)
        self.last_start[e.point] = max(r.start for r in self.by_round[e.point])

    def _on_deregister(self, e: Entry) -> None:
        self._burn(e)

    def _burn(self, e: Entry) -> None:
        from_escrow, from_vested = e.detail.get("from_escrow"), e.detail.get("from_vested")
        if type(from_escrow) is not int or type(from_vested) is not int:
            raise JournalError("burn entry lacks integer from_escrow / from_vested")
        closed = 0
        for rnd, delta in _pairs(e.detail.get("rounds")):
            row = self.rows.get((rnd, e.hotkey))
            if row is None or row.closed or delta != row.amount - row.forfeited - row.released:
                raise JournalError(f"burn of round {rnd} does not match its open escrow")
            row.closed, row.locked = True, 0
            closed += delta
        if closed != from_escrow or from_escrow + from_vested != e.amount:
            raise JournalError("burn amount differs from what it closes")
        if any(
            not r.closed and r.released < r.amount - r.forfeited
            for r in self.by_hotkey.get(e.hotkey, [])
        ):
            raise JournalError("burn leaves part of the hotkey's escrow open")
        for bond in self.bonds.values():  # a locked bond burns with the rest
            if bond.hotkey == e.hotkey and bond.state == "locked":
                bond.state = "consumed"
        bal = self._bal(e.hotkey)
        if from_vested != bal.vested:
            raise JournalError("burn does not take exactly the vested-unpaid balance")
        bal.escrowed -= from_escrow
        bal.vested -= from_vested
        bal.burned += e.amount
        self._nonnegative(e.hotkey)

    def _on_bond_lock(self, e: Entry) -> None:
        if e.point != len(self.bonds) + 1 or e.amount <= 0:
            raise JournalError(f"bond {e.point} is out of sequence or empty")
        if not isinstance(e.detail.get("dispute"), str):
            raise JournalError(f"bond {e.point} names no dispute")
        pairs = _pairs(e.detail.get("rounds"))
        for rnd, delta in pairs:
            row = self.rows.get((rnd, e.hotkey))
            if row is None or row.closed or delta <= 0 or row.released + delta > row.cap:
                raise JournalError(f"bond {e.point} locks more than the escrow of round {rnd}")
            row.locked += delta
        if sum(d for _, d in pairs) != e.amount:
            raise JournalError(f"bond {e.point} amount differs from what it locks")
        self.bonds[e.point] = BondRec(e.hotkey, e.amount, pairs)

    def _bond(self, e: Entry) -> BondRec:
        bond = self.bonds.get(e.point)
        if bond is None or bond.state != "locked" or bond.hotkey != e.hotkey:
            raise JournalError(f"bond {e.point} of {e.hotkey} is not locked")
        if e.amount != bond.amount or _pairs(e.detail.get("rounds")) != bond.rounds:
            raise JournalError(f"bond {e.point} is settled for other amounts than it locked")
        return bond

    def _on_bond_burn(self, e: Entry) -> None:
        bond = self._bond(e)
        for rnd, delta in bond.rounds:
            row = self.rows[(rnd, e.hotkey)]
            row.locked -= delta
            row.forfeited += delta
        bond.state = "burned"
        bal = self._bal(e.hotkey)
        bal.escrowed -= e.amount
        bal.burned += e.amount
        self._nonnegative(e.hotkey)

    def _on_bond_return(self, e: Entry) -> None:
        bond = self._bond(e)
        for rnd, delta in bond.rounds:
            self.rows[(rnd, e.hotkey)].locked -= delta
        total = 0
        for rnd, delta in _pairs(e.detail.get("vest")):
            row = self.rows.get((rnd, e.hotkey))
            if row is None or row.closed or delta <= 0 or rnd not in {w for w, _ in bond.rounds}:
                raise JournalError(f"bond {e.point} vests from no open escrow of round {rnd}")
            if row.released + delta != self._due(row):
                raise JournalError(f"bond {e.point} does not vest round {rnd} to its schedule")
            row.released += delta
            total += delta
        for rnd, _ in bond.rounds:
            row = self.rows[(rnd, e.hotkey)]
            if row.released != self._due(row):
                raise JournalError(f"bond {e.point} leaves round {rnd} off its schedule")
        bond.state = "returned"
        bal = self._bal(e.hotkey)
        bal.escrowed -= total
        bal.vested += total
        self._nonnegative(e.hotkey)

    def _on_pay(self, e: Entry) -> None:
        bal = self._bal(e.hotkey)
        bal.vested -= e.amount
        bal.paid += e.amount
        self._nonnegative(e.hotkey)
        epoch_pays = self.pays.setdefault(e.point, {})
        epoch_pays[e.hotkey] = epoch_pays.get(e.hotkey, 0) + e.amount

    def _on_epoch(self, e: Entry) -> None:
        nominal = self.nominal_release()
        if e.detail.get("nominal") != nominal or e.amount != nominal - self.nominal:
            raise JournalError(f"epoch {e.point} full share mass does not match the schedule")
        self.nominal = nominal
        self.masses[e.point] = e.amount

    def nominal_release(self) -> int:
        """Everything the schedule has released so far, had nothing been burned."""
        v, clock, total = self.vesting_rounds, self.clock, 0
        for w, (pool, _, unallocated) in self.rounds.items():
            if clock - self.last_start.get(w, w) >= v:  # fully released, holds included
                total += pool
                continue
            total += vested_prefix(unallocated, v, clock - w)
            total += sum(self._scheduled(row) for row in self.by_round.get(w, []))
        return total

    def _scheduled(self, row: Row) -> int:
        """What the schedule has released of an escrow at the current clock."""
        return vested_prefix(row.amount, self.vesting_rounds, self.clock - row.start)

    def _due(self, row: Row) -> int:
        """What the escrow may have released by now: the schedule, short of any bond."""
        return min(self._scheduled(row), row.cap)

    def _nonnegative(self, hotkey: str) -> None:
        if min(self.balances[hotkey].as_tuple()) < 0:
            raise JournalError(f"balance of {hotkey} goes negative")

    def finish(self) -> None:
        """Check the end-of-journal invariants."""
        held = sum(sum(b.as_tuple()) for b in self.balances.values())
        if self.minted != held + self.burned:
            raise JournalError(
                f"conservation fails: minted {self.minted} != held {held} + burned {self.burned}"
            )
        for rnd, (pool, escrowed, unallocated) in self.rounds.items():
            if escrowed + unallocated != pool:
                raise JournalError(f"round {rnd} is not fully accounted for")
        for (w, hotkey), row in self.rows.items():
            due = self._due(row)
            if (row.released != due) if not row.closed else (row.released > due):
                raise JournalError(f"escrow of {hotkey} from round {w} is off its schedule")


def _pairs(value: Any) -> list[tuple[int, int]]:
    if not isinstance(value, list):
        raise JournalError("entry detail lacks its list of rounds")
    out: list[tuple[int, int]] = []
    for item in value:
        if (
            not isinstance(item, list)
            or len(item) != 2
            or any(type(x) is not int or x < 0 for x in item)
        ):
            raise JournalError("entry detail has a malformed [round, amount] pair")
        out.append((item[0], item[1]))
    return out
