"""No failure swallowed on a bond, verdict or reward path: raised typed or recorded."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hypertrain.challenge.app import create_app
from hypertrain.challenge.errors import BondMissingError
from hypertrain.challenge.metagraph import FileMetagraph, MetagraphView
from hypertrain.challenge.rule import PENDING_AUDIT
from hypertrain.challenge.wiring import LedgerAdapter
from hypertrain.ledger import Ledger
from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario import (
    ISLANDS,
    OTHER_AUDITOR,
    RUN,
    Service,
    bonded,
    merge_round_0,
    service,
    to_verdict,
    verdict_on,
)
from tests.challenge.disputeplay import commitment as _commitment
from tests.challenge.disputeplay import open_body as _open_body
from tests.challenge.helpers import (
    LaggingBeacon,
    bearer,
    commit_body,
    join_body,
    make_settings,
    manifest_doc,
    signed,
)

__all__ = ["bonded", "service"]  # the fixtures, by name


def test_the_ledger_adapter_raises_for_a_bond_it_does_not_hold(tmp_path: Path) -> None:
    ledger = LedgerAdapter(Ledger.in_state_dir(tmp_path))
    ledger.create_run(RUN, pool_per_round=1000, vesting_rounds=1)
    with pytest.raises(BondMissingError) as caught:
        ledger.settle_bond(RUN, "ab" * 32, True, 1)
    assert caught.value.code == "no_bond"


def test_a_bond_the_ledger_lacks_is_recorded_missing_not_returned(bonded: Service) -> None:
    verdict_id, segment = to_verdict(bonded)
    bonded.ledger.settled[(RUN, 99)] = {ISLANDS[0].ss58_address: 500}
    opened = bonded.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    assert opened.status_code == 200, opened.text
    dispute_id, game = opened.json()["dispute_id"], opened.json()["game"]
    bonded.ledger.bonds.clear()  # the ledger holds no bond for this dispute
    body = _commitment(game, "island")
    r = bonded.post(f"/v1/disputes/{dispute_id}/answer", ISLANDS[0], "dispute-answer", body)
    assert r.status_code == 200, r.text
    bonded.tick(4)  # decided (overturned): the bond cannot move, and says so
    state = bonded.client.app.state.service  # type: ignore[attr-defined]
    row = state.conn.execute(
        "SELECT outcome, bond_state FROM dispute_games WHERE dispute_id = ?", (dispute_id,)
    ).fetchone()
    assert (row["outcome"], row["bond_state"]) == ("overturned", "missing")
    assert bonded.ledger.bonds == {}


def test_a_late_verdict_without_a_metagraph_is_refused_and_not_stored(
    service: Service, tmp_path: Path
) -> None:
    to_verdict(service)  # island 1 is assigned too, and nobody judges it in time
    service.tick(20)
    merge_round_0(service)
    service.tick()
    assert service.ledger.held[(RUN, 0)][ISLANDS[1].ss58_address] == PENDING_AUDIT
    state = service.client.app.state.service  # type: ignore[attr-defined]
    # with no epoch to book the late verdict at, it is refused and leaves no record
    # the metagraph file goes away and the service restarts its view: no snapshot
    live, state.metagraph = state.metagraph, MetagraphView(FileMetagraph(tmp_path / "gone", 1))
    before = state.conn.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
    late = verdict_on(service, OTHER_AUDITOR, ISLANDS[1], "mismatch")
    assert (late.status_code, late.json()["error"]) == (503, "no_metagraph")
    assert state.conn.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] == before
    assert service.ledger.faults == [(RUN, 0, ISLANDS[0].ss58_address)]
    state.metagraph = live  # back: the auditor's retry is booked
    assert verdict_on(service, OTHER_AUDITOR, ISLANDS[1], "mismatch").status_code == 200
    service.tick(3)  # its own dispute window (dispute_window_rounds 2) closed undisputed
    assert (RUN, 0, ISLANDS[1].ss58_address) in service.ledger.faults


@dataclass
class BrokenSchedule(LaggingBeacon):
    def due_round(self) -> int:
        raise ValueError("the chain's schedule cannot be read")


def test_no_schedule_refuses_every_deadline_check(tmp_path: Path) -> None:
    keys = [Hotkey.from_seed(bytes([9]) * 32)]
    settings = make_settings(tmp_path, [k.ss58_address for k in keys])
    with TestClient(create_app(settings, beacon=BrokenSchedule())) as client:
        r = client.post(
            "/admin/v1/runs", json={"manifest": manifest_doc()}, headers=bearer("admin")
        )
        assert r.status_code == 200, r.text
        joined = client.post("/v1/join", json=signed(keys[0], "join", join_body()))
        assert (joined.status_code, joined.json()["error"]) == (503, "no_clock")
        late = client.post("/v1/commit", json=signed(keys[0], "commit", commit_body(0)))
        assert (late.status_code, late.json()["error"]) == (503, "no_clock")
        assert client.get("/health").json()["beacon"]["lagging"] is True
