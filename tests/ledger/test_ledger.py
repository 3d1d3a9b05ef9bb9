"""Ledger operations: settlement, vesting, faults with clawback, deregistration, bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hypertrain.ledger import (
    InvalidAmountError,
    InvalidHotkeyError,
    Ledger,
    LedgerConflictError,
    LedgerError,
    RoundNotFinalError,
    UnknownHotkeyError,
    UnknownRunError,
)


def _conserved(ledger: Ledger, run_id: str) -> None:
    s = ledger.summary(run_id)
    assert s.minted == s.escrowed + s.vested + s.paid + s.burned


def test_create_run_is_idempotent_and_refuses_conflicts(ledger: Ledger) -> None:
    assert ledger.create_run("r1", 1000, 3) is True
    assert ledger.create_run("r1", 1000, 3) is False
    with pytest.raises(LedgerConflictError, match="exists"):
        ledger.create_run("r1", 999, 3)
    assert ledger.summary("r1").journal_entries == 1


@pytest.mark.parametrize(
    ("pool", "vesting", "error"),
    [(-1, 3, InvalidAmountError), (1.5, 3, InvalidAmountError), (True, 3, InvalidAmountError),
     (10, 0, InvalidAmountError), (2**53, 3, InvalidAmountError)],
)  # fmt: skip
def test_create_run_refuses_bad_config(
    ledger: Ledger, pool: Any, vesting: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        ledger.create_run("r1", pool, vesting)


def test_create_run_refuses_bad_run_id(ledger: Ledger) -> None:
    with pytest.raises(UnknownRunError, match="not a valid run id"):
        ledger.create_run("bad id/with slash", 10, 3)


def test_settle_splits_escrows_and_is_idempotent(ledger: Ledger, hotkeys: list[str]) -> None:
    a, b, c = hotkeys[:3]
    ledger.create_run("r1", 1000, 3)
    result = ledger.settle_round("r1", 0, {a: 3, b: 1, c: 0}, epoch=1)
    assert result.applied and result.rewards == {a: 750, b: 250, c: 0}
    assert result.unallocated == 0
    assert ledger.balances("r1", a).escrowed == 750
    head = ledger.summary("r1").head_hash
    again = ledger.settle_round("r1", 0, {c: 0, b: 1, a: 3}, epoch=2)
    assert not again.applied and again.rewards == result.rewards
    assert ledger.summary("r1").head_hash == head
    with pytest.raises(LedgerConflictError, match="different inputs"):
        ledger.settle_round("r1", 0, {a: 3, b: 2}, epoch=1)
    _conserved(ledger, "r1")


def test_settle_burns_what_nobody_can_receive(ledger: Ledger, hotkeys: list[str]) -> None:
    ledger.create_run("r1", 1000, 3)
    assert ledger.settle_round("r1", 0, {}, epoch=1).unallocated == 1000
    assert ledger.settle_round("r1", 1, {hotkeys[0]: 0}, epoch=1).unallocated == 1000
    s = ledger.summary("r1")
    assert (s.minted, s.burned, s.escrowed) == (2000, 2000, 0)


def test_vesting_releases_one_tranche_per_settled_round(ledger: Ledger, hotkeys: list[str]) -> None:
    a = hotkeys[0]
    ledger.create_run("r1", 1000, 3)
    ledger.settle_round("r1", 0, {a: 1}, epoch=1)
    vested = []
    for rnd in range(1, 5):
        ledger.settle_round("r1", rnd, {}, epoch=1)
        vested.append(ledger.balances("r1", a).vested)
    assert vested == [334, 667, 1000, 1000]  # tranches 334, 333, 333
    assert ledger.balances("r1", a).escrowed == 0


def test_out_of_order_settlement_catches_up(ledger: Ledger, hotkeys: list[str]) -> None:
    a = hotkeys[0]
    ledger.create_run("r1", 900, 3)
    ledger.settle_round("r1", 5, {}, epoch=1)
    ledger.settle_round("r1", 3, {a: 1}, epoch=1)  # clock is 5: two tranches are due
    assert ledger.balances("r1", a).vested == 600
    assert ledger.verify().ok


@pytest.mark.parametrize(
    "accepted",
    [{"H": -1}, {"H": 1.0}, {"H": True}, {"H": "5"}, {"H": 2**53}],
)
def test_settle_refuses_bad_amounts(
    ledger: Ledger, hotkeys: list[str], accepted: dict[str, Any]
) -> None:
    ledger.create_run("r1", 1000, 3)
    with pytest.raises(InvalidAmountError):
        ledger.settle_round("r1", 0, {hotkeys[0]: accepted["H"]}, epoch=1)
    assert ledger.summary("r1").journal_entries == 1


def test_settle_refuses_bad_hotkey_run_round_epoch(ledger: Ledger, hotkeys: list[str]) -> None:
    ledger.create_run("r1", 1000, 3)
    with pytest.raises(InvalidHotkeyError):
        ledger.settle_round("r1", 0, {"not-an-address": 1}, epoch=1)
    with pytest.raises(UnknownRunError):
        ledger.settle_round("nope", 0, {hotkeys[0]: 1}, epoch=1)
    with pytest.raises(InvalidAmountError):
        ledger.settle_round("r1", -1, {hotkeys[0]: 1}, epoch=1)
    with pytest.raises(InvalidAmountError):
        ledger.settle_round("r1", 0, {hotkeys[0]: 1}, epoch=-3)


def test_fault_burns_unvested_and_claws_back_vested_unpaid(
    ledger: Ledger, hotkeys: list[str]
) -> None:
    a, b = hotkeys[:2]
    ledger.create_run("r1", 1000, 4)
    for rnd in range(3):
        ledger.settle_round("r1", rnd, {a: 1, b: 1}, epoch=rnd)
    ledger.get_weights(2, [a, b])  # pays what vested so far
    ledger.settle_round("r1", 3, {a: 1, b: 1}, epoch=3)
    before = ledger.balances("r1", a)
    assert before.paid > 0 and before.vested > 0 and before.escrowed > 0
    burned = ledger.record_fault("r1", 1, a, "verdict 7: segment 3 mismatch", epoch=3)
    assert burned == before.escrowed + before.vested
    after = ledger.balances("r1", a)
    assert (after.escrowed, after.vested, after.paid) == (0, 0, before.paid)  # paid is final
    assert ledger.record_fault("r1", 1, a, "again", epoch=4) == 0  # idempotent
    assert ledger.balances("r1", b).burned == 0
    ledger.settle_round("r1", 4, {a: 1, b: 1}, epoch=4)  # a can earn again later
    assert ledger.balances("r1", a).escrowed == 500
    _conserved(ledger, "r1")
    assert ledger.verify().ok


def test_fault_refuses_non_final_round_and_unknown_hotkey(
    ledger: Ledger, hotkeys: list[str]
) -> None:
    a = hotkeys[0]
    ledger.create_run("r1", 1000, 3)
    ledger.settle_round("r1", 0, {a: 1}, epoch=1)
    with pytest.raises(RoundNotFinalError, match="not final"):
        ledger.record_fault("r1", 1, a, "mismatch", epoch=1)
    with pytest.raises(UnknownHotkeyError):
        ledger.record_fault("r1", 0, hotkeys[1], "mismatch", epoch=1)
    with pytest.raises(UnknownRunError):
        ledger.record_fault("r2", 0, a, "mismatch", epoch=1)
    with pytest.raises(UnknownHotkeyError):
        ledger.balances("r1", hotkeys[1])


def test_deregister_burns_unpaid_value_in_every_run(ledger: Ledger, hotkeys: list[str]) -> None:
    a, b = hotkeys[:2]
    for run in ("r1", "r2"):
        ledger.create_run(run, 1000, 2)
        ledger.settle_round(run, 0, {a: 1, b: 1}, epoch=1)
        ledger.settle_round(run, 1, {a: 1, b: 1}, epoch=1)
    ledger.get_weights(1, [a, b])
    ledger.settle_round("r1", 2, {a: 1, b: 1}, epoch=2)
    paid = ledger.balances("r1", a).paid
    burned = ledger.deregister(a, epoch=2)
    assert burned == 1500 + 1000 - paid - ledger.balances("r2", a).paid
    for run in ("r1", "r2"):
        bal = ledger.balances(run, a)
        assert (bal.escrowed, bal.vested) == (0, 0)
        _conserved(ledger, run)
    assert ledger.deregister(a, epoch=2) == 0  # idempotent per epoch
    answer = ledger.get_weights(3, [b])
    assert a not in answer.weights and answer.weights[b] > 0
    with pytest.raises(UnknownHotkeyError, match="no history"):
        ledger.deregister(hotkeys[5], epoch=2)
    ledger.settle_round("r1", 3, {a: 1}, epoch=5)  # re-registered: earns afresh
    assert ledger.balances("r1", a).escrowed == 1000
    assert ledger.verify().ok


def test_ledger_file_is_wal_and_reopens(tmp_path: Path, hotkeys: list[str]) -> None:
    path = tmp_path / "l.sqlite3"
    with Ledger(path) as led:
        led.create_run("r1", 10, 2)
        led.settle_round("r1", 0, {hotkeys[0]: 1}, epoch=0)
        mode = led._conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    with Ledger.in_state_dir(tmp_path) as other:
        assert other.runs() == []
    with Ledger(path) as again:
        assert again.balances("r1", hotkeys[0]).escrowed == 10
        assert again.verify().ok


def test_fault_reason_and_registered_shape_are_checked(ledger: Ledger, hotkeys: list[str]) -> None:
    ledger.create_run("r1", 10, 1)
    ledger.settle_round("r1", 0, {hotkeys[0]: 1}, epoch=0)
    with pytest.raises(LedgerError, match="reason"):
        ledger.record_fault("r1", 0, hotkeys[0], "x" * 2000, epoch=0)
    with pytest.raises(LedgerError, match="collection"):
        ledger.get_weights(1, hotkeys[0])
