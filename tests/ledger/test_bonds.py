"""Dispute bonds: locked from escrow as their own entry, then burned or returned."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from hypertrain.cli import main
from hypertrain.ledger import BondError, Ledger, LedgerConflictError, verify_export
from hypertrain.ledger.storage import LEDGER_FILENAME

RUN = "r1"
D1 = hashlib.sha256(b"dispute 1").hexdigest()
D2 = hashlib.sha256(b"dispute 2").hexdigest()


def _two_rounds(ledger: Ledger, hk: list[str]) -> None:
    """Pool 1000, vesting 4: each of two islands earns 500 in rounds 0 and 1."""
    ledger.create_run(RUN, 1000, 4)
    for rnd in range(2):
        ledger.settle_round(RUN, rnd, {hk[0]: 1, hk[1]: 1}, rnd)


def _kinds(ledger: Ledger) -> list[dict[str, Any]]:
    rows = ledger._conn.execute(
        "SELECT body FROM journal WHERE run_id = ? AND kind LIKE 'bond_%' ORDER BY seq", (RUN,)
    )
    return [json.loads(bytes(r[0])) for r in rows]


def test_lock_pauses_vesting_and_a_won_dispute_returns_it(
    ledger: Ledger, hotkeys: list[str]
) -> None:
    _two_rounds(ledger, hotkeys)
    assert ledger.balances(RUN, hotkeys[0]).vested == 125
    assert ledger.lock_bond(RUN, hotkeys[0], D1, 600, 2) == 1
    assert ledger.lock_bond(RUN, hotkeys[0], D1, 600, 2) == 1  # a repeat locks nothing more
    lock = _kinds(ledger)
    assert [(e["kind"], e["point"], e["amount"]) for e in lock] == [("bond_lock", 1, 600)]
    assert lock[0]["detail"] == {"dispute": D1, "rounds": [[0, 100], [1, 500]]}  # newest first
    bal = ledger.balances(RUN, hotkeys[0])
    assert (bal.escrowed, bal.vested, bal.burned) == (875, 125, 0)  # still escrow, locked
    ledger.settle_round(RUN, 2, {hotkeys[1]: 1}, 2)
    # round 1's escrow is locked whole: it does not vest; round 0 vests on schedule
    assert ledger.balances(RUN, hotkeys[0]).vested == 250
    assert ledger.balances(RUN, hotkeys[1]).vested == 250 + 125
    assert ledger.verify().ok
    assert ledger.settle_bond(RUN, D1, True, 3) == 600
    assert ledger.settle_bond(RUN, D1, True, 3) == 0  # a repeat moves nothing
    ret = _kinds(ledger)[-1]
    assert (ret["kind"], ret["amount"], ret["detail"]["vest"]) == ("bond_return", 600, [[1, 125]])
    assert ledger.balances(RUN, hotkeys[0]).vested == 375  # caught up with the schedule
    assert ledger.summary(RUN).burned == 0
    assert ledger.verify().ok


def test_a_lost_dispute_burns_the_bond_then_the_fault_the_rest(
    ledger: Ledger, hotkeys: list[str], tmp_path: Path
) -> None:
    _two_rounds(ledger, hotkeys)
    ledger.lock_bond(RUN, hotkeys[0], D1, 600, 2)
    assert ledger.settle_bond(RUN, D1, False, 2) == 600
    bal = ledger.balances(RUN, hotkeys[0])
    assert (bal.escrowed, bal.vested, bal.burned) == (275, 125, 600)
    burn = _kinds(ledger)[-1]
    assert (burn["kind"], burn["point"], burn["detail"]) == (
        "bond_burn",
        1,
        {"rounds": [[0, 100], [1, 500]]},
    )
    for rnd in range(2, 8):  # what was not bonded keeps vesting to the end
        ledger.settle_round(RUN, rnd, {hotkeys[1]: 1}, rnd)
    bal = ledger.balances(RUN, hotkeys[0])
    assert (bal.escrowed, bal.vested, bal.burned) == (0, 400, 600)
    assert ledger.verify().ok
    ledger.record_fault(RUN, 7, hotkeys[0], "upheld verdict", 8)
    assert ledger.balances(RUN, hotkeys[0]).burned == 1000
    summary = ledger.summary(RUN)
    assert summary.minted == summary.escrowed + summary.vested + summary.paid + summary.burned
    assert ledger.verify().ok
    out = tmp_path / "journal.jsonl"
    ledger.export_journal(out)
    assert verify_export(out).ok


def test_a_fault_while_locked_burns_the_bond_with_the_rest(
    ledger: Ledger, hotkeys: list[str]
) -> None:
    _two_rounds(ledger, hotkeys)
    ledger.lock_bond(RUN, hotkeys[0], D1, 300, 2)
    ledger.record_fault(RUN, 1, hotkeys[0], "another round's fault", 2)
    assert ledger.balances(RUN, hotkeys[0]).burned == 1000
    assert ledger.settle_bond(RUN, D1, True, 3) == 0  # nothing left to return
    assert [e["kind"] for e in _kinds(ledger)] == ["bond_lock"]
    assert ledger.verify().ok


def test_refusals(ledger: Ledger, hotkeys: list[str]) -> None:
    _two_rounds(ledger, hotkeys)
    with pytest.raises(BondError, match="unlocked escrow"):
        ledger.lock_bond(RUN, hotkeys[0], D1, 876, 2)  # 875 unvested
    ledger.lock_bond(RUN, hotkeys[0], D1, 800, 2)
    with pytest.raises(BondError, match="unlocked escrow"):
        ledger.lock_bond(RUN, hotkeys[0], D2, 100, 2)  # only 75 left unlocked
    with pytest.raises(LedgerConflictError):
        ledger.lock_bond(RUN, hotkeys[0], D1, 700, 2)
    with pytest.raises(BondError, match="hex"):
        ledger.lock_bond(RUN, hotkeys[0], "not-a-dispute", 1, 2)
    with pytest.raises(BondError, match="no bond"):
        ledger.settle_bond(RUN, D2, True, 2)
    assert ledger.verify().ok


@pytest.mark.parametrize(
    "tamper",
    [
        "UPDATE escrows SET locked = 0",
        "UPDATE bonds SET state = 'returned'",
        "UPDATE bonds SET amount = amount + 1",
    ],
)
def test_tampered_bond_tables_are_detected(tmp_path: Path, hotkeys: list[str], tamper: str) -> None:
    path = tmp_path / "l.sqlite3"
    with Ledger(path) as led:
        _two_rounds(led, hotkeys)
        led.lock_bond(RUN, hotkeys[0], D1, 600, 2)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(tamper)
    conn.close()
    with Ledger(path) as led:
        assert not led.verify().ok


def test_cli_verify_rebuilds_bonds_and_catches_an_edited_one(
    tmp_path: Path, hotkeys: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger.in_state_dir(tmp_path) as led:
        _two_rounds(led, hotkeys)
        led.lock_bond(RUN, hotkeys[0], D1, 600, 2)
        led.lock_bond(RUN, hotkeys[1], D2, 50, 2)
        led.settle_bond(RUN, D1, False, 2)
        led.settle_bond(RUN, D2, True, 2)
    assert main(["ledger", "verify", "--state-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("OK: 1 run(s)")
    conn = sqlite3.connect(tmp_path / LEDGER_FILENAME)
    with conn:  # claim the lost bond was smaller: the journal no longer adds up
        conn.execute(
            "UPDATE journal SET body = replace(body, '\"amount\":600', '\"amount\":60')"
            " WHERE kind = 'bond_burn'"
        )
    conn.close()
    assert main(["ledger", "verify", "--state-dir", str(tmp_path)]) == 1
    assert "first bad entry" in capsys.readouterr().out
