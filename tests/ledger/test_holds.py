"""Probation holds: held rewards stay in escrow until probation ends, then vest normally."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from hypertrain.ledger import (
    InvalidAmountError,
    InvalidHoldError,
    InvalidHotkeyError,
    Ledger,
    LedgerConflictError,
    verify_export,
)
from hypertrain.ledger.journal import GENESIS, Entry, make_entry
from hypertrain.ledger.split import vest_start
from hypertrain.ledger.storage import SCHEMA_VERSION, migrate, schema_version

RUN = "r1"


def _probation(ledger: Ledger, hk: list[str], rounds: int = 3, release: int = 3) -> None:
    """Pool 1000, vesting 2: hk[0] is on probation until ``release``, hk[1] is not."""
    ledger.create_run(RUN, 1000, 2)
    for rnd in range(rounds):
        ledger.settle_round(RUN, rnd, {hk[0]: 1, hk[1]: 1}, rnd, held={hk[0]: release})


def _journal(ledger: Ledger, kind: str) -> list[dict[str, Any]]:
    rows = ledger._conn.execute(
        "SELECT body FROM journal WHERE run_id = ? AND kind = ? ORDER BY seq", (RUN, kind)
    )
    return [json.loads(bytes(r[0])) for r in rows]


def test_vest_start() -> None:
    assert vest_start(4, 0) == 4  # never held
    assert vest_start(0, 3) == 2  # vests as if earned in the last probation round
    assert vest_start(2, 3) == 2  # the last probation round itself is not delayed


def test_held_reward_neither_vests_nor_pays_during_probation(
    ledger: Ledger, hotkeys: list[str]
) -> None:
    _probation(ledger, hotkeys)
    held, free = ledger.balances(RUN, hotkeys[0]), ledger.balances(RUN, hotkeys[1])
    assert (held.escrowed, held.vested, held.held) == (1500, 0, 1500)
    assert (free.escrowed, free.vested, free.held) == (750, 750, 0)
    answer = ledger.get_weights(5, hotkeys)
    assert answer.weights == {hotkeys[1]: 750}
    assert ledger.summary(RUN).held == 1500
    assert ledger.verify().ok


def test_after_probation_held_rewards_vest_on_schedule(ledger: Ledger, hotkeys: list[str]) -> None:
    _probation(ledger, hotkeys)
    ledger.get_weights(5, hotkeys)
    ledger.settle_round(RUN, 3, {hotkeys[0]: 1, hotkeys[1]: 1}, 6)  # first round after probation
    bal = ledger.balances(RUN, hotkeys[0])
    assert (bal.escrowed, bal.vested, bal.held) == (1250, 750, 0)  # 3 x 250, first tranche
    assert ledger.get_weights(6, hotkeys).weights == {hotkeys[0]: 750, hotkeys[1]: 500}
    ledger.settle_round(RUN, 4, {hotkeys[0]: 1, hotkeys[1]: 1}, 7)
    bal = ledger.balances(RUN, hotkeys[0])
    assert (bal.escrowed, bal.vested, bal.paid) == (750, 1000, 750)  # held all vested + 250
    other = ledger.balances(RUN, hotkeys[1])  # caught up: same escrow, same value released
    assert (other.escrowed, other.vested + other.paid) == (bal.escrowed, bal.vested + bal.paid)
    report = ledger.verify()
    assert report.ok, report.render()


def test_fault_during_probation_burns_everything_held(ledger: Ledger, hotkeys: list[str]) -> None:
    _probation(ledger, hotkeys, rounds=2)
    assert ledger.record_fault(RUN, 1, hotkeys[0], "mismatch", 2) == 1000
    bal = ledger.balances(RUN, hotkeys[0])
    assert (bal.escrowed, bal.vested, bal.paid, bal.burned, bal.held) == (0, 0, 0, 1000, 0)
    fault = _journal(ledger, "fault")[0]["detail"]
    assert fault == {"from_escrow": 1000, "from_vested": 0, "rounds": [[0, 500], [1, 500]]}
    for rnd in range(2, 6):  # the run goes on; nothing of the burned escrow ever vests
        ledger.settle_round(RUN, rnd, {hotkeys[1]: 1}, rnd)
    assert ledger.balances(RUN, hotkeys[0]).burned == 1000
    assert ledger.verify().ok


def test_escrow_entry_records_the_hold_only_when_held(ledger: Ledger, hotkeys: list[str]) -> None:
    _probation(ledger, hotkeys, rounds=1)
    details = {e["hotkey"]: e["detail"] for e in _journal(ledger, "escrow")}
    assert details == {hotkeys[0]: {"tokens": 1, "held_until": 3}, hotkeys[1]: {"tokens": 1}}


def test_repeat_is_idempotent_and_changed_holds_conflict(
    ledger: Ledger, hotkeys: list[str]
) -> None:
    _probation(ledger, hotkeys, rounds=1)
    accepted = {hotkeys[0]: 1, hotkeys[1]: 1}
    head = ledger.summary(RUN).head_hash
    again = ledger.settle_round(RUN, 0, accepted, 0, held={hotkeys[0]: 3})
    assert not again.applied and again.rewards == {hotkeys[0]: 500, hotkeys[1]: 500}
    for other in ({}, {hotkeys[0]: 4}, {hotkeys[0]: 3, hotkeys[1]: 2}):
        with pytest.raises(LedgerConflictError, match="different inputs"):
            ledger.settle_round(RUN, 0, accepted, 0, held=other)
    assert ledger.summary(RUN).head_hash == head


@pytest.mark.parametrize(
    ("held", "error", "match"),
    [
        ({"H1": 2}, InvalidHoldError, "not after round 2"),
        ({"H1": 1}, InvalidHoldError, "not after round 2"),
        ({"H2": 5}, InvalidHoldError, "has no reward"),
        ({"H1": 3.0}, InvalidAmountError, "must be an integer"),
        ({"H1": True}, InvalidAmountError, "must be an integer"),
        ({"H1": -1}, InvalidAmountError, ">= 0"),
        ({"not-an-ss58": 5}, InvalidHotkeyError, "invalid hotkey"),
        ([("H1", 5)], InvalidHoldError, "must map hotkeys"),
    ],
)
def test_bad_holds_are_refused(
    ledger: Ledger, hotkeys: list[str], held: Any, error: type[Exception], match: str
) -> None:
    ledger.create_run(RUN, 1000, 2)
    names = {"H1": hotkeys[0], "H2": hotkeys[1]}
    if isinstance(held, dict):
        held = {names.get(k, k): v for k, v in held.items()}
    else:
        held = [(names[k], v) for k, v in held]
    with pytest.raises(error, match=match):
        ledger.settle_round(RUN, 2, {hotkeys[0]: 1}, 0, held=held)
    assert ledger.summary(RUN).rounds_settled == 0


def test_full_share_mass_follows_the_delayed_schedule(ledger: Ledger, hotkeys: list[str]) -> None:
    """Burned or held, every tranche is counted once, on its own schedule."""
    ledger.create_run(RUN, 100, 2)
    ledger.settle_round(RUN, 0, {hotkeys[0]: 1}, 0, held={hotkeys[0]: 4})
    masses = []
    for rnd in range(1, 7):
        ledger.settle_round(RUN, rnd, {}, rnd)  # nobody earns: the pool is burned
        masses.append(ledger.get_weights(rnd, hotkeys).full_share_mass)
    # round r's burned pool releases 50 at r+1 and 50 at r+2; the held 100 releases
    # 50 at 4 and 50 at 5 (vesting counted from round 3)
    assert masses == [0, 50, 100, 150, 150, 100]
    assert ledger.get_weights(7, hotkeys).weights == {}
    assert ledger.verify().ok


def _chain(*specs: dict[str, Any]) -> list[Entry]:
    entries: list[Entry] = []
    prev = GENESIS
    for seq, spec in enumerate(specs, start=1):
        entry = make_entry(run="x", seq=seq, prev=prev, **spec)
        entries.append(entry)
        prev = entry.hash
    return entries


HEAD: tuple[dict[str, Any], ...] = (
    {"kind": "open_run", "point": 0, "detail": {"pool_per_round": 10, "vesting_rounds": 1}},
    {"kind": "mint", "point": 0, "amount": 10},
)


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        ([{"kind": "escrow", "point": 0, "hotkey": "H", "amount": 10,
           "detail": {"held_until": 0}}], "invalid probation hold"),
        ([{"kind": "escrow", "point": 0, "hotkey": "H", "amount": 10,
           "detail": {"held_until": "3"}}], "invalid probation hold"),
        ([{"kind": "escrow", "point": 0, "hotkey": "H", "amount": 10,
           "detail": {"held_until": 3}},
          {"kind": "mint", "point": 1, "amount": 10},
          {"kind": "burn_unallocated", "point": 1, "amount": 10},
          {"kind": "vest", "point": 1, "hotkey": "H", "amount": 10,
           "detail": {"rounds": [[0, 10]]}}], "runs ahead of its schedule"),
        ([{"kind": "escrow", "point": 0, "hotkey": "H", "amount": 10,
           "detail": {"held_until": 3}},
          {"kind": "mint", "point": 1, "amount": 10},
          {"kind": "burn_unallocated", "point": 1, "amount": 10},
          {"kind": "epoch", "point": 1, "amount": 10, "detail": {"nominal": 10}}],
         "full share mass"),
    ],
)  # fmt: skip
def test_replay_checks_holds(tmp_path: Path, tail: list[dict[str, Any]], message: str) -> None:
    good = _chain(*HEAD, {"kind": "escrow", "point": 0, "hotkey": "H", "amount": 10,
                          "detail": {"held_until": 3}})  # fmt: skip
    path = tmp_path / "good.jsonl"
    path.write_bytes(b"".join(e.body + b"\n" for e in good))
    assert verify_export(path).ok
    path.write_bytes(b"".join(e.body + b"\n" for e in _chain(*HEAD, *tail)))
    report = verify_export(path)
    assert not report.ok and report.first_bad is not None and message in report.first_bad


def test_tampered_hold_column_is_detected(tmp_path: Path, hotkeys: list[str]) -> None:
    with Ledger(tmp_path / "l.sqlite3") as led:
        _probation(led, hotkeys, rounds=1)
    conn = sqlite3.connect(tmp_path / "l.sqlite3")
    with conn:
        conn.execute("UPDATE escrows SET held_until = 0")
    conn.close()
    with Ledger(tmp_path / "l.sqlite3") as led:
        report = led.verify()
    assert not report.ok and "escrow rows differ" in report.render()


def test_version_2_database_gains_the_hold_column(tmp_path: Path, hotkeys: list[str]) -> None:
    path = tmp_path / "l.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=2)
    conn.close()
    with Ledger(path) as led:
        assert schema_version(led._conn) == SCHEMA_VERSION == 4
        _probation(led, hotkeys, rounds=2)
        assert led.balances(RUN, hotkeys[0]).held == 1000
        assert led.verify().ok


def test_release_ends_a_pending_hold_at_the_clock(ledger: Ledger, hotkeys: list[str]) -> None:
    """A hold waiting for a verdict (release round 2^53 - 1) ends only by release_hold."""
    pending = 2**53 - 1
    ledger.create_run(RUN, 1000, 2)
    ledger.settle_round(RUN, 0, {hotkeys[0]: 1, hotkeys[1]: 1}, 0, held={hotkeys[0]: pending})
    for rnd in (1, 2):
        ledger.settle_round(RUN, rnd, {hotkeys[1]: 1}, rnd)
    assert ledger.balances(RUN, hotkeys[0]).held == 500  # the clock never reaches it
    assert not ledger.release_hold(RUN, 1, hotkeys[0], 3)  # nothing held in round 1
    assert ledger.release_hold(RUN, 0, hotkeys[0], 3)
    assert not ledger.release_hold(RUN, 0, hotkeys[0], 3)  # a repeat does nothing
    assert _journal(ledger, "release")[0]["detail"] == {"held_until": 3}
    ledger.settle_round(RUN, 3, {hotkeys[1]: 1}, 3)
    assert ledger.balances(RUN, hotkeys[0]).vested == 250  # first tranche at the next round
    assert ledger.verify().ok
