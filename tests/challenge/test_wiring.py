"""The ledger adapter: a ledger that cannot answer is a typed error, never a zero.

A journal fault read as "no escrow" made a dispute bond 0; read as "no balances" it showed
every island of the roster at 0. Both now raise :class:`LedgerFaultError` (503,
``ledger_error``) and log the fault; a hotkey with no history stays what the ledger says.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hypertrain.challenge.app import create_app
from hypertrain.challenge.errors import LedgerFaultError
from hypertrain.challenge.wiring import LedgerAdapter
from hypertrain.ledger import JournalError, Ledger
from hypertrain.ledger.views import Balance
from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import (
    SteppedBeacon,
    bearer,
    join_body,
    make_settings,
    manifest_doc,
    signed,
)

RUN = "run-1"
ISLAND = Hotkey.from_seed(b"\x01" * 32)


class BrokenJournal(Ledger):
    """A real ledger whose reads fail as a corrupted journal would."""

    def free_escrow(self, run_id: str, hotkey: str) -> int:
        raise JournalError("previous-hash link is broken")

    def balances(self, run_id: str, hotkey: str) -> Balance:
        raise JournalError("previous-hash link is broken")


@pytest.fixture
def broken(tmp_path: Path) -> Iterator[LedgerAdapter]:
    with BrokenJournal(tmp_path / "ledger.sqlite3") as ledger:
        yield LedgerAdapter(ledger)


def test_a_failing_ledger_is_loud_not_zero(
    broken: LedgerAdapter, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="hypertrain.challenge.wiring"):
        with pytest.raises(LedgerFaultError) as escrow:
            broken.free_escrow(RUN, ISLAND.ss58_address)
        with pytest.raises(LedgerFaultError) as balances:
            broken.balances(RUN, [ISLAND.ss58_address])
    for caught in (escrow.value, balances.value):
        assert (caught.status, caught.code) == (503, "ledger_error")
        assert "previous-hash link" in caught.detail
    assert [getattr(r, "operation", None) for r in caplog.records] == ["free_escrow", "balances"]


def test_an_island_without_history_is_the_ledgers_answer(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        ledger.create_run(RUN, 1000, 1)
        adapter = LedgerAdapter(ledger)
        assert adapter.free_escrow(RUN, ISLAND.ss58_address) == 0
        assert adapter.balances(RUN, [ISLAND.ss58_address]) == {}
        with pytest.raises(LedgerFaultError):  # a run the ledger never opened is a fault
            adapter.balances("no-such-run", [ISLAND.ss58_address])


def test_the_roster_of_a_failing_ledger_is_a_typed_503(
    tmp_path: Path, broken: LedgerAdapter
) -> None:
    settings = make_settings(tmp_path, [ISLAND.ss58_address])
    app = create_app(settings, beacon=SteppedBeacon(), ledger=broken)
    with TestClient(app) as client:
        created = client.post(
            "/admin/v1/runs", json={"manifest": manifest_doc(RUN)}, headers=bearer("admin")
        )
        assert created.status_code == 200, created.text
        joined = client.post("/v1/join", json=signed(ISLAND, "join", join_body(), run_id=RUN))
        assert joined.status_code == 200, joined.text
        roster = client.get(f"/v1/runs/{RUN}/roster")
    assert (roster.status_code, roster.json()["error"]) == (503, "ledger_error"), roster.text
