"""Money is never a silent zero: a missing figure or an impossible ledger answer on a
reward, bond or burn path raises (``LedgerFaultError``) or keeps what was there.

Each case was a read that turned an absent value into 0: a departed island's balance
without its ``escrow`` / ``vested`` figures read as nothing to burn, a negative free
escrow read as a bond of nothing, and a reward the re-decided rule no longer accepts
(absent from its ``held``) read as "release now", which let a faulted island's escrow
vest.
"""

from __future__ import annotations

import sqlite3
from typing import cast

import pytest

from hypertrain.challenge.disputes.bonds import dispute_bond
from hypertrain.challenge.errors import LedgerFaultError
from hypertrain.challenge.platform.weights import burn_departed, unpaid_value
from hypertrain.challenge.rule import PENDING_AUDIT, PROBATION_HOLD, Outcome
from hypertrain.challenge.settlement.settle import hold_after
from tests.challenge.conftest import Harness
from tests.challenge.helpers import FakeLedger, join_body, signed

H = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"


class BalanceWithoutFigures(FakeLedger):
    """A ledger whose balance answer lacks the figures the burn reads."""

    def balances(self, run_id: str, hotkeys: list[str]) -> dict[str, dict[str, int]]:
        return {h: {"held": 0, "paid": 0, "burned": 0} for h in hotkeys}


class NegativeFreeEscrow(FakeLedger):
    def free_escrow(self, run_id: str, hotkey: str) -> int:
        return -3


def test_a_departed_islands_balance_without_its_figures_is_a_ledger_fault(
    harness: Harness,
) -> None:
    h = harness
    key = h.miners[0]
    assert h.client.post("/v1/join", json=signed(key, "join", join_body())).status_code == 200
    ledger = BalanceWithoutFigures()
    h.state.ledger = ledger
    with pytest.raises(LedgerFaultError, match="no 'escrow' figure"):
        burn_departed(h.state, 5, frozenset())  # it left: its value must be burned or fail
    assert ledger.deregistered == []  # nothing booked on a guess
    assert unpaid_value("run-1", key.ss58_address, {"escrow": 0, "vested": 7}) == 7
    assert unpaid_value("run-1", key.ss58_address, {"escrow": 0, "vested": 0}) == 0


def test_a_negative_free_escrow_is_a_ledger_fault_not_a_bond_of_nothing() -> None:
    conn = cast(sqlite3.Connection, None)  # refused before any stored dispute is read
    with pytest.raises(LedgerFaultError, match="holds -3 of free escrow"):
        dispute_bond(conn, NegativeFreeEscrow(), "run-1", H, bond=10)


@pytest.mark.parametrize(
    ("decided", "expected"),
    [
        (Outcome(faults={H: "mismatch verdict"}), None),  # was: released (vests)
        (Outcome(unpaid={H: "rolled_back"}), None),  # was: released
        (Outcome(), None),  # absent from the outcome: never "release now"
        (Outcome(accepted={H: 100}), 0),  # paid: release now
        (Outcome(accepted={H: 100}, held={H: 9}), 9),  # held until a round: released then
        (Outcome(accepted={H: 100}, held={H: PENDING_AUDIT}), None),  # the rule keeps it
        (Outcome(accepted={H: 100}, held={H: PROBATION_HOLD}), None),
    ],
    ids=["faulted", "unpaid", "absent", "paid", "until", "pending", "probation"],
)
def test_a_held_reward_is_released_only_where_the_rule_accepts_it(
    decided: Outcome, expected: int | None
) -> None:
    assert hold_after(decided, H) == expected
