"""hypertrain.ledger: integer escrow, vesting, burns and get_weights over a hash-chained journal.

Public API (all amounts are ``int`` base units; anything else is refused)::

    ledger = Ledger(path)                       # or Ledger.in_state_dir(state_dir)
    ledger.create_run(run_id, pool_per_round, vesting_rounds)      -> bool (idempotent)
    ledger.settle_round(run_id, round, {hotkey: verified_tokens}, epoch,
                        held={hotkey: probation_end_round}) -> SettleResult
    ledger.record_fault(run_id, round, hotkey, reason, epoch)      -> amount burned
    ledger.release_hold(run_id, round, hotkey, epoch, until=0)      -> bool (ended a hold)
    ledger.lock_bond(run_id, hotkey, dispute_id, amount, epoch)     -> bond number
    ledger.settle_bond(run_id, dispute_id, won, epoch)              -> amount returned/burned
    ledger.deregister(hotkey, epoch)                                -> amount burned
    ledger.get_weights(epoch, registered_hotkeys)                   -> WeightsAnswer
    ledger.balances(run_id, hotkey) -> Balance;  ledger.summary(run_id) -> RunSummary
    ledger.verify(run_id=None) -> VerifyReport;  ledger.export_journal(path, run_id=None)
    verify_export(path) -> VerifyReport         # re-verify an export anywhere

Rules, in short (docs/mechanism.md has the full text and a worked example):

* settle_round is called once a round is final. The run's pool is split over the
  accepted hotkeys in proportion to verified tokens by largest remainder (ties to the
  smaller SS58 string); with no eligible miner the whole pool is burned.
* Each reward vests in ``vesting_rounds`` integer tranches (the first ``R mod V`` are one
  unit larger). The vesting clock is the highest settled round: tranche ``i`` of a
  round-``w`` reward vests when a round ``>= w + 1 + i`` is settled.
* A reward settled with a probation hold (``held``: the first round after the
  island's probation, or a large sentinel that only ``release_hold`` ends) stays in
  escrow and vests as if earned in round ``held_until - 1``; a fault before then burns
  it like any other unvested value.
* record_fault (round must be final) and deregister burn everything of the hotkey in
  the run(s) that is not yet paid: open escrow and vested-unpaid value (clawback).
* "Paid" means included in the first get_weights answer of an epoch. That answer is
  persisted and returned byte-identically afterwards. Runs combine by summing per
  hotkey; full_share_mass is the sum over runs of the nominal release since the
  previous answer. Unregistered hotkeys are left out and their value stays withheld.
* lock_bond locks part of a miner's unvested escrow for a dispute (it stops vesting);
  settle_bond burns it (lost) or returns it (won: vesting catches up at once). A fault
  or deregistration meanwhile burns it with the rest.
* Every operation is idempotent by its natural key (run, kind, point, hotkey).

Errors are :class:`LedgerError` subclasses (see :mod:`hypertrain.ledger.errors`).
This package never imports torch.
"""

from hypertrain.ledger.errors import (
    BondError,
    EpochError,
    InvalidAmountError,
    InvalidHoldError,
    InvalidHotkeyError,
    JournalError,
    LedgerConflictError,
    LedgerError,
    LedgerStorageError,
    RoundNotFinalError,
    UnknownHotkeyError,
    UnknownRunError,
)
from hypertrain.ledger.ledger import Ledger
from hypertrain.ledger.settle import SettleResult
from hypertrain.ledger.split import largest_remainder, vested_prefix, vesting_schedule
from hypertrain.ledger.storage import LEDGER_FILENAME, SCHEMA_VERSION
from hypertrain.ledger.verify import VerifyReport, verify_export
from hypertrain.ledger.views import Balance, RunSummary
from hypertrain.ledger.weights import WeightsAnswer

__all__ = [
    "LEDGER_FILENAME",
    "SCHEMA_VERSION",
    "Balance",
    "BondError",
    "EpochError",
    "InvalidAmountError",
    "InvalidHoldError",
    "InvalidHotkeyError",
    "JournalError",
    "Ledger",
    "LedgerConflictError",
    "LedgerError",
    "LedgerStorageError",
    "RoundNotFinalError",
    "RunSummary",
    "SettleResult",
    "UnknownHotkeyError",
    "UnknownRunError",
    "VerifyReport",
    "WeightsAnswer",
    "largest_remainder",
    "verify_export",
    "vested_prefix",
    "vesting_schedule",
]
