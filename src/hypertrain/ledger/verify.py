"""Verify a ledger from its journal alone: hash chains, rules, invariants, materialised views.

:func:`verify_db` replays every run's journal (see :mod:`hypertrain.ledger.rebuild`),
then compares the rebuilt state with the tables the service reads (runs, rounds,
escrows, balances) and every persisted get_weights answer with the ``pay`` and ``epoch``
entries it produced. :func:`verify_export` does the same replay on an exported JSON-lines
journal, without any database. The report names the first bad entry, if any.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hypertrain.ledger.errors import JournalError
from hypertrain.ledger.journal import Entry, decode_entry
from hypertrain.ledger.rebuild import RunReplay
from hypertrain.ledger.settle import BURNED, OPEN
from hypertrain.ledger.weights import WeightsAnswer


@dataclass
class VerifyReport:
    """Outcome of a verification; ``ok`` only if no problem was found anywhere."""

    runs: int = 0
    entries: int = 0
    first_bad: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, problem: str) -> None:
        self.problems.append(problem)

    def render(self) -> str:
        head = "OK" if self.ok else "FAILED"
        lines = [f"{head}: {self.runs} run(s), {self.entries} journal entries checked"]
        if self.first_bad:
            lines.append(f"first bad entry: {self.first_bad}")
        lines.extend(f"  - {p}" for p in self.problems)
        return "\n".join(lines)


def replay_run(run_id: str, entries: Iterable[Entry], report: VerifyReport) -> RunReplay | None:
    """Replay one run's entries; on the first violation record it and return None."""
    replay = RunReplay(run_id)
    iterator = iter(entries)
    try:
        for entry in iterator:
            report.entries += 1
            replay.apply(entry)
        replay.finish()
    except JournalError as exc:
        where = f"run {run_id} entry {replay.head_seq + 1}: {exc}"
        report.first_bad = report.first_bad or where
        report.add(where)
        return None
    return replay


def _db_entries(conn: sqlite3.Connection, run_id: str) -> Iterator[Entry]:
    cursor = conn.execute(
        "SELECT seq, kind, point, hotkey, amount, body, hash FROM journal"
        " WHERE run_id = ? ORDER BY seq",
        (run_id,),
    )
    for seq, kind, point, hotkey, amount, body, stored_hash in cursor:
        entry = decode_entry(_as_bytes(body))
        if entry.hash != stored_hash:
            raise JournalError(f"entry {seq} was edited: its bytes no longer match its hash")
        if (entry.seq, entry.kind, entry.point, entry.hotkey, entry.amount) != (
            seq, kind, point, hotkey, amount,
        ):  # fmt: skip
            raise JournalError(f"entry {seq} was edited: its columns differ from its body")
        yield entry


def _as_bytes(value: object) -> bytes:
    """A stored blob; an edit through SQL text functions may have turned it into TEXT."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise JournalError(f"stored value has type {type(value).__name__}, expected bytes")


def verify_db(conn: sqlite3.Connection, run_id: str | None = None) -> VerifyReport:
    """Replay and cross-check one run (``run_id``) or every run plus the weights answers."""
    report = VerifyReport()
    query = "SELECT run_id FROM runs WHERE ?1 IS NULL OR run_id = ?1 ORDER BY 1"
    run_ids = [str(r[0]) for r in conn.execute(query, (run_id,))]
    if run_id and not run_ids:
        report.add(f"unknown run {run_id!r}")
    replays: dict[str, RunReplay] = {}
    for rid in run_ids:
        report.runs += 1
        replay = replay_run(rid, _db_entries(conn, rid), report)
        if replay is not None:
            _compare_tables(conn, replay, report)
            replays[rid] = replay
    if run_id is None and len(replays) == len(run_ids):
        _compare_weights(conn, replays, report)
    return report


def _compare_tables(conn: sqlite3.Connection, replay: RunReplay, report: VerifyReport) -> None:
    rid = replay.run
    run_row = conn.execute(
        "SELECT pool_per_round, vesting_rounds, clock, minted, burned, nominal_mark, head_seq,"
        " head_hash FROM runs WHERE run_id = ?",
        (rid,),
    ).fetchone()
    expected = (
        replay.pool_per_round, replay.vesting_rounds, replay.clock, replay.minted,
        replay.burned, replay.nominal, replay.head_seq, replay.head_hash,
    )  # fmt: skip
    if tuple(run_row) != expected:
        report.add(f"run {rid}: run totals {tuple(run_row)} differ from the journal {expected}")
    balances = {
        str(h): (int(e), int(v), int(p), int(b))
        for h, e, v, p, b in conn.execute(
            "SELECT hotkey, escrowed, vested, paid, burned FROM balances WHERE run_id = ?", (rid,)
        )
    }
    rebuilt = {h: b.as_tuple() for h, b in replay.balances.items()}
    for hotkey in sorted(set(balances) | set(rebuilt)):
        if balances.get(hotkey) != rebuilt.get(hotkey):
            report.add(
                f"run {rid}: balance of {hotkey} is {balances.get(hotkey)} in the table"
                f" but {rebuilt.get(hotkey)} from the journal"
            )
    _compare_escrows(conn, replay, report)
    rounds = {
        int(w): (int(p), int(u))
        for w, p, u in conn.execute(
            "SELECT round, pool, unallocated FROM rounds WHERE run_id = ?", (rid,)
        )
    }
    if rounds != {w: (r[0], r[2]) for w, r in replay.rounds.items()}:
        report.add(f"run {rid}: the rounds table differs from the journal")


def _compare_escrows(conn: sqlite3.Connection, replay: RunReplay, report: VerifyReport) -> None:
    table = {
        (int(w), str(h)): tuple(int(x) for x in rest)
        for w, h, *rest in conn.execute(
            "SELECT round, hotkey, amount, released, closed, held_until, locked, forfeited"
            " FROM escrows WHERE run_id = ?",
            (replay.run,),
        )
    }
    rebuilt = {}
    for key, row in replay.rows.items():
        done = row.released == row.amount - row.forfeited and not row.locked
        state = BURNED if row.closed else (2 if done else OPEN)
        rebuilt[key] = (
            row.amount, row.released, state, row.held_until, row.locked, row.forfeited
        )  # fmt: skip
    if table != rebuilt:
        bad = sorted(k for k in set(table) | set(rebuilt) if table.get(k) != rebuilt.get(k))
        report.add(f"run {replay.run}: escrow rows differ from the journal, first {bad[0]}")
    bonds = {
        int(n): (str(h), int(a), str(st))
        for n, h, a, st in conn.execute(
            "SELECT bond, hotkey, amount, state FROM bonds WHERE run_id = ?", (replay.run,)
        )
    }
    if bonds != {n: (b.hotkey, b.amount, b.state) for n, b in replay.bonds.items()}:
        report.add(f"run {replay.run}: the bonds table differs from the journal")


def _compare_weights(
    conn: sqlite3.Connection, replays: dict[str, RunReplay], report: VerifyReport
) -> None:
    stored = {int(e): _as_bytes(a) for e, a in conn.execute("SELECT epoch, answer FROM weights")}
    epochs = set(stored)
    for replay in replays.values():
        epochs |= set(replay.masses)
    for epoch in sorted(epochs):
        weights: dict[str, int] = {}
        mass = 0
        for replay in replays.values():
            mass += replay.masses.get(epoch, 0)
            for hotkey, amount in replay.pays.get(epoch, {}).items():
                weights[hotkey] = weights.get(hotkey, 0) + amount
        expected = WeightsAnswer(epoch, weights, mass).canonical
        if stored.get(epoch) != expected:
            report.add(f"weights answer for epoch {epoch} differs from its journal entries")


def verify_export(path: Path) -> VerifyReport:
    """Replay an exported JSON-lines journal (any number of runs, each in order)."""
    report = VerifyReport()
    by_run: dict[str, list[Entry]] = {}
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                entry = decode_entry(line.rstrip(b"\n"))
            except JournalError as exc:
                report.first_bad = report.first_bad or f"line {number}: {exc}"
                report.add(f"line {number}: {exc}")
                return report
            by_run.setdefault(entry.run, []).append(entry)
    for run_id in sorted(by_run):
        report.runs += 1
        replay_run(run_id, by_run[run_id], report)
    return report
