"""The :class:`Ledger`: one SQLite file, any number of runs, every operation atomic.

Each public method validates its inputs, then runs in one ``BEGIN IMMEDIATE``
transaction that writes the journal entries and the materialised tables together.
Every operation is idempotent by its natural key ``(run, kind, point, hotkey)``:
repeating it changes nothing (a settlement repeated with different inputs is refused).
A lock serialises callers within a process; SQLite's write lock serialises processes.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from hypertrain.ledger import bonds as _bonds
from hypertrain.ledger import settle as _settle
from hypertrain.ledger import views
from hypertrain.ledger.errors import (
    BondError,
    LedgerConflictError,
    LedgerError,
    RoundNotFinalError,
    UnknownHotkeyError,
)
from hypertrain.ledger.journal import GENESIS
from hypertrain.ledger.settle import SettleResult
from hypertrain.ledger.storage import LEDGER_FILENAME, connect
from hypertrain.ledger.validate import (
    check_dispute,
    check_holds,
    check_hotkey,
    check_int,
    check_run_id,
)
from hypertrain.ledger.verify import VerifyReport, verify_db
from hypertrain.ledger.weights import WeightsAnswer, answer_epoch, stored_answer
from hypertrain.ledger.writer import append, has_key, load_run
from hypertrain.protocol.canonical import canonical_hash
from hypertrain.protocol.sqlite import transaction

logger = logging.getLogger(__name__)
MAX_REASON_CHARS = 1024


class Ledger:
    """Integer escrow, vesting, burns and get_weights over a hash-chained journal."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._conn = connect(self.path)
        self._lock = threading.RLock()

    @classmethod
    def in_state_dir(cls, state_dir: Path) -> Ledger:
        """The conventional ledger file of a service state directory."""
        return cls(Path(state_dir) / LEDGER_FILENAME)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock, transaction(self._conn) as conn:
            yield conn

    def create_run(self, run_id: str, pool_per_round: int, vesting_rounds: int = 10) -> bool:
        """Create a run (True), or confirm an identical one exists (False)."""
        check_run_id(run_id)
        check_int(pool_per_round, "pool_per_round")
        check_int(vesting_rounds, "vesting_rounds", minimum=1)
        with self._tx() as conn:
            row = conn.execute(
                "SELECT pool_per_round, vesting_rounds FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is not None:
                if tuple(row) != (pool_per_round, vesting_rounds):
                    raise LedgerConflictError(
                        f"run {run_id!r} exists with pool {row[0]} and vesting {row[1]}"
                    )
                return False
            conn.execute(
                "INSERT INTO runs (run_id, pool_per_round, vesting_rounds, head_hash)"
                " VALUES (?, ?, ?, ?)",
                (run_id, pool_per_round, vesting_rounds, GENESIS),
            )
            detail = {"pool_per_round": pool_per_round, "vesting_rounds": vesting_rounds}
            append(conn, run_id, "open_run", 0, detail=detail)
        logger.info("ledger run created", extra={"run": run_id})
        return True

    def settle_round(
        self,
        run_id: str,
        round: int,
        accepted: Mapping[str, int],
        epoch: int,
        held: Mapping[str, int] | None = None,
    ) -> SettleResult:
        """Make ``round`` final: split the pool by verified tokens, escrow, burn the rest.

        ``held`` maps hotkeys still in probation to the first round after their
        probation: their rewards stay in escrow and start vesting only from there.
        """
        check_run_id(run_id)
        check_int(round, "round")
        check_int(epoch, "epoch")
        clean = {
            check_hotkey(h): check_int(t, f"verified tokens of {h}") for h, t in accepted.items()
        }
        holds = check_holds(held or {}, clean, round)
        inputs: dict[str, object] = {"accepted": clean}
        if holds:  # absent when empty: unheld settlements keep their original hash
            inputs["held"] = holds
        inputs_hash = canonical_hash(inputs)
        with self._tx() as conn:
            run = load_run(conn, run_id)
            prior = conn.execute(
                "SELECT inputs_hash, unallocated FROM rounds WHERE run_id = ? AND round = ?",
                (run_id, round),
            ).fetchone()
            if prior is not None:
                if prior[0] != inputs_hash:
                    raise LedgerConflictError(
                        f"round {round} of run {run_id!r} was settled with different inputs"
                    )
                rewards = dict(conn.execute(
                    "SELECT hotkey, amount FROM escrows WHERE run_id = ? AND round = ?",
                    (run_id, round),
                ).fetchall())  # fmt: skip
                return SettleResult(run_id, round, rewards, int(prior[1]), applied=False)
            result = _settle.settle(conn, run, round, clean, epoch, holds)
            conn.execute(
                "INSERT INTO rounds (run_id, round, epoch, pool, unallocated, inputs_hash)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, round, epoch, run.pool_per_round, result.unallocated, inputs_hash),
            )
        return result

    def record_fault(self, run_id: str, round: int, hotkey: str, reason: str, epoch: int) -> int:
        """Burn everything unpaid of ``hotkey`` in the run for a proven fault in ``round``.

        Returns the amount burned (0 on a repeat). The round must be final (settled) and
        the hotkey must have a history in the run (:class:`UnknownHotkeyError` otherwise:
        a miner faulting in its first round holds nothing to burn).
        """
        check_run_id(run_id)
        check_int(round, "round")
        check_int(epoch, "epoch")
        check_hotkey(hotkey)
        if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS:
            raise LedgerError(f"reason must be a string of at most {MAX_REASON_CHARS} characters")
        with self._tx() as conn:
            load_run(conn, run_id)
            final = conn.execute(
                "SELECT 1 FROM rounds WHERE run_id = ? AND round = ?", (run_id, round)
            ).fetchone()
            if final is None:
                raise RoundNotFinalError(f"round {round} of run {run_id!r} is not final yet")
            if has_key(conn, run_id, "fault", round, hotkey):
                return 0
            views.balance(conn, run_id, hotkey)
            return _settle.burn_all(conn, run_id, hotkey, "fault", round, epoch, reason)

    def release_hold(
        self, run_id: str, round: int, hotkey: str, epoch: int, until: int = 0
    ) -> bool:
        """End the hold on ``hotkey``'s escrow from ``round`` (its audit was answered).

        The escrow then vests like one earned at the current clock (or held until
        ``until``, a probation's end, if that is later): its first tranche comes with the
        next settlement. Returns False when there is nothing held to release (no such
        escrow, already vesting, closed, or a repeat).
        """
        check_run_id(run_id)
        check_int(round, "round")
        check_int(epoch, "epoch")
        check_int(until, "until")
        check_hotkey(hotkey)
        with self._tx() as conn:
            run = load_run(conn, run_id)
            if has_key(conn, run_id, "release", round, hotkey):
                return False
            return _settle.release(conn, run, round, hotkey, epoch, until)

    def lock_bond(self, run_id: str, hotkey: str, dispute: str, amount: int, epoch: int) -> int:
        """Lock ``amount`` of ``hotkey``'s unvested escrow as the bond of ``dispute``.

        Returns the bond's number in the run; a repeat for the same dispute returns the
        same number and locks nothing more. :class:`BondError` when the miner's unlocked
        escrow is smaller than the bond.
        """
        check_run_id(run_id)
        check_hotkey(hotkey)
        check_int(amount, "bond", minimum=1)
        check_int(epoch, "epoch")
        check_dispute(dispute)
        with self._tx() as conn:
            run = load_run(conn, run_id)
            found = _bonds.find(conn, run_id, dispute)
            if found is not None:
                if (found.hotkey, found.amount) != (hotkey, amount):
                    raise LedgerConflictError(f"dispute {dispute[:16]} has another bond")
                return found.bond
            views.balance(conn, run_id, hotkey)
            return _bonds.lock(conn, run, hotkey, dispute, amount, epoch).bond

    def settle_bond(self, run_id: str, dispute: str, won: bool, epoch: int) -> int:
        """Return (``won``) or burn the bond of ``dispute``; returns the amount moved.

        0 on a repeat, or when a fault or deregistration already burned the bond with
        the rest of the miner's escrow. :class:`BondError` if the dispute has no bond.
        """
        check_run_id(run_id)
        check_dispute(dispute)
        check_int(epoch, "epoch")
        with self._tx() as conn:
            run = load_run(conn, run_id)
            bond = _bonds.find(conn, run_id, dispute)
            if bond is None:
                raise BondError(f"dispute {dispute[:16]} has no bond in run {run_id!r}")
            if bond.state != "locked":
                return 0
            if won:
                return _bonds.give_back(conn, run, bond, epoch)
            return _bonds.burn(conn, run, bond, epoch, f"dispute {dispute} lost")

    def deregister(self, hotkey: str, epoch: int) -> int:
        """The hotkey left the subnet at ``epoch``: burn its unpaid value in every run.

        Returns the amount burned. The natural key (hotkey, epoch) is one event across all
        runs: a repeat is a no-op (returns 0) even if the hotkey has earned in another run
        since. Refuses a hotkey that has no history in any run.
        """
        check_hotkey(hotkey)
        check_int(epoch, "epoch")
        with self._tx() as conn:
            runs = [str(r[0]) for r in conn.execute(
                "SELECT run_id FROM balances WHERE hotkey = ? ORDER BY run_id", (hotkey,)
            )]  # fmt: skip
            if not runs:
                raise UnknownHotkeyError(f"hotkey {hotkey} has no history in any run")
            if any(has_key(conn, r, "deregister", epoch, hotkey) for r in runs):
                return 0  # one event for the whole ledger, even if runs were added since
            reason = f"deregistered at epoch {epoch}"
            return sum(
                _settle.burn_all(conn, r, hotkey, "deregister", epoch, epoch, reason) for r in runs
            )

    def get_weights(self, epoch: int, registered: Collection[str]) -> WeightsAnswer:
        """The integer weights for ``epoch``; the first answer is final and pays out."""
        check_int(epoch, "epoch")
        if isinstance(registered, str):
            raise LedgerError("registered must be a collection of hotkeys, not one string")
        with self._tx() as conn:
            existing = stored_answer(conn, epoch)
            if existing is not None:
                return existing
            return answer_epoch(conn, epoch, registered)

    def weights_bytes(self, epoch: int) -> bytes | None:
        """The persisted canonical answer for ``epoch``, if it was answered."""
        with self._lock:
            row = self._conn.execute(
                "SELECT answer FROM weights WHERE epoch = ?", (epoch,)
            ).fetchone()
        return None if row is None else bytes(row[0])

    def balances(self, run_id: str, hotkey: str) -> views.Balance:
        with self._lock:
            return views.balance(self._conn, run_id, hotkey)

    def free_escrow(self, run_id: str, hotkey: str) -> int:
        """The escrow a new bond of ``hotkey`` could lock (neither vested nor locked)."""
        with self._lock:
            return _bonds.free_escrow(self._conn, run_id, hotkey)

    def summary(self, run_id: str) -> views.RunSummary:
        with self._lock:
            return views.summary(self._conn, run_id)

    def runs(self) -> list[str]:
        with self._lock:
            return [str(r[0]) for r in self._conn.execute("SELECT run_id FROM runs ORDER BY 1")]

    def verify(self, run_id: str | None = None) -> VerifyReport:
        """Rebuild from the journal and check chains, invariants and tables."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                return verify_db(self._conn, run_id)
            finally:
                self._conn.execute("ROLLBACK")

    def export_journal(self, path: Path, run_id: str | None = None) -> int:
        """Write the journal (one run or all) as JSON lines; return the entry count."""
        with Path(path).open("wb") as out:
            return self.write_journal(out, run_id)

    def write_journal(self, out: BinaryIO, run_id: str | None = None) -> int:
        """Write each entry's exact bytes, one per line, ordered by run then sequence."""
        query = "SELECT body FROM journal WHERE ?1 IS NULL OR run_id = ?1 ORDER BY run_id, seq"
        count = 0
        with self._lock:
            if run_id is not None:
                load_run(self._conn, run_id)
            for (body,) in self._conn.execute(query, (run_id,)):
                out.write(bytes(body) + b"\n")
                count += 1
        return count
