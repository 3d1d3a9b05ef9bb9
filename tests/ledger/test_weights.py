"""get_weights: first answer final and byte-identical, registration, full share mass, runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypertrain.ledger import EpochError, InvalidAmountError, Ledger, WeightsAnswer
from hypertrain.protocol.canonical import canonical_bytes


def _settle_rounds(ledger: Ledger, run: str, rounds: range, accepted: dict[str, int]) -> None:
    for rnd in rounds:
        ledger.settle_round(run, rnd, accepted, epoch=rnd)


def test_first_answer_is_final_and_pays(ledger: Ledger, hotkeys: list[str]) -> None:
    a, b = hotkeys[:2]
    ledger.create_run("r1", 1000, 2)
    _settle_rounds(ledger, "r1", range(3), {a: 3, b: 1})
    first = ledger.get_weights(7, [a, b])
    assert first.weights == {a: 750 + 375, b: 250 + 125}
    assert first.full_share_mass == sum(first.weights.values())  # nothing burned
    assert ledger.balances("r1", a).paid == 1125
    again = ledger.get_weights(7, [b])  # later calls ignore the new metagraph
    assert again == first and again.canonical == first.canonical
    assert ledger.weights_bytes(7) == first.canonical
    assert ledger.balances("r1", a).paid == 1125  # not paid twice
    empty = ledger.get_weights(8, [a, b])
    assert empty.weights == {} and empty.full_share_mass == 0
    assert ledger.weights_bytes(9) is None


def test_answer_bytes_are_canonical_json(ledger: Ledger, hotkeys: list[str]) -> None:
    ledger.create_run("r1", 10, 1)
    _settle_rounds(ledger, "r1", range(2), {hotkeys[0]: 1})
    answer = ledger.get_weights(1, hotkeys)
    expected = {"epoch": 1, "full_share_mass": 10, "weights": {hotkeys[0]: 10}}
    assert answer.canonical == canonical_bytes(expected)
    assert WeightsAnswer.from_bytes(answer.canonical) == answer


def test_unregistered_hotkeys_are_withheld_then_paid(ledger: Ledger, hotkeys: list[str]) -> None:
    a, b = hotkeys[:2]
    ledger.create_run("r1", 1000, 1)
    _settle_rounds(ledger, "r1", range(2), {a: 1, b: 1})
    first = ledger.get_weights(1, [a])
    assert first.weights == {a: 500} and first.full_share_mass == 1000  # b's share burns
    assert ledger.balances("r1", b).vested == 500  # withheld, not lost
    second = ledger.get_weights(2, [a, b])
    assert second.weights == {b: 500} and second.full_share_mass == 0


def test_mass_counts_burned_and_unallocated_tranches(ledger: Ledger, hotkeys: list[str]) -> None:
    a, b = hotkeys[:2]
    ledger.create_run("r1", 1000, 2)
    ledger.settle_round("r1", 0, {a: 1, b: 1}, epoch=0)
    ledger.settle_round("r1", 1, {}, epoch=0)  # pool burned: nobody eligible
    ledger.record_fault("r1", 0, b, "mismatch", epoch=0)
    ledger.settle_round("r1", 2, {}, epoch=0)
    answer = ledger.get_weights(1, [a, b])
    assert answer.weights == {a: 500}
    # Schedule released rounds 0 (both tranches) and 1 (first tranche): 1000 + 500.
    assert answer.full_share_mass == 1500
    assert answer.full_share_mass >= sum(answer.weights.values())


def test_runs_combine_by_summing(ledger: Ledger, hotkeys: list[str]) -> None:
    a, b = hotkeys[:2]
    ledger.create_run("r1", 1000, 1)
    ledger.create_run("r2", 300, 1)
    _settle_rounds(ledger, "r1", range(2), {a: 1})
    _settle_rounds(ledger, "r2", range(2), {a: 1, b: 2})
    answer = ledger.get_weights(4, [a, b])
    assert answer.weights == {a: 1000 + 100, b: 200}
    assert answer.full_share_mass == 1300


def test_epoch_order_and_bad_epoch(ledger: Ledger, hotkeys: list[str]) -> None:
    ledger.get_weights(5, hotkeys)
    assert ledger.get_weights(5, []).epoch == 5
    with pytest.raises(EpochError, match="precedes"):
        ledger.get_weights(4, hotkeys)
    with pytest.raises(InvalidAmountError):
        ledger.get_weights(-1, hotkeys)


def test_same_history_gives_same_bytes(tmp_path: Path, hotkeys: list[str]) -> None:
    answers = []
    for name in ("x.sqlite3", "y.sqlite3"):
        with Ledger(tmp_path / name) as led:
            led.create_run("r1", 997, 3)
            for rnd in range(5):
                led.settle_round("r1", rnd, {h: i + 1 for i, h in enumerate(hotkeys)}, epoch=0)
            led.record_fault("r1", 2, hotkeys[3], "mismatch", epoch=0)
            answers.append(led.get_weights(1, hotkeys[::-1]).canonical)
            answers.append(led.summary("r1").head_hash.encode())
    assert answers[0] == answers[2] and answers[1] == answers[3]
