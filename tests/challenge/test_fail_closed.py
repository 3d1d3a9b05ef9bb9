"""Fail closed on time, and the small holes: expiry horizon, audit settings, the loss curve."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hypertrain.beacon import QUICKNET, BeaconClient
from hypertrain.beacon.timing import time_of_round
from hypertrain.challenge.app import _poll_beacon, create_app
from hypertrain.challenge.state import MAX_EXPIRY_HORIZON_ROUNDS, ServiceState
from hypertrain.protocol.identity import Hotkey
from tests.challenge.conftest import Harness
from tests.challenge.dashdata import run_rounds
from tests.challenge.helpers import (
    FakeLedger,
    LaggingBeacon,
    bearer,
    commit_body,
    join_body,
    make_settings,
    manifest_doc,
    signed,
)


@pytest.fixture
def lagging(tmp_path: Path, miner_keys: list[Hotkey]) -> Iterator[tuple[TestClient, LaggingBeacon]]:
    settings = make_settings(tmp_path, [k.ss58_address for k in miner_keys])
    beacon = LaggingBeacon()
    app = create_app(settings, beacon=beacon, ledger=FakeLedger())
    with TestClient(app) as client:
        created = client.post(
            "/admin/v1/runs", json={"manifest": manifest_doc()}, headers=bearer("admin")
        )
        assert created.status_code == 200, created.text
        yield client, beacon


def _poll(client: TestClient) -> None:
    state: ServiceState = client.app.state.service  # type: ignore[attr-defined]
    client.portal.call(_poll_beacon, state)  # type: ignore[union-attr]


def test_a_lagging_beacon_closes_the_commit_window(
    lagging: tuple[TestClient, LaggingBeacon], miner_keys: list[Hotkey]
) -> None:
    client, beacon = lagging
    for key in miner_keys[:2]:
        assert client.post("/v1/join", json=signed(key, "join", join_body())).is_success
    opened = client.post(
        "/admin/v1/runs/run-1/rounds",
        headers=bearer("admin"),
        json={"start_model_sha256": "aa" * 32, "start_model_url": "http://r/m0"},
    )
    deadline = opened.json()["body"]["commit_deadline_round"]
    ok = client.post("/v1/commit", json=signed(miner_keys[0], "commit", commit_body(0)))
    assert ok.status_code == 200, ok.text
    # the poll stalls: the service still holds round 100, but the selecting round
    # (deadline + 1) is due by the clock and may be public elsewhere
    beacon.due = deadline + 1
    _poll(client)
    late = client.post("/v1/commit", json=signed(miner_keys[1], "commit", commit_body(0)))
    assert (late.status_code, late.json()["error"]) == (409, "late")
    health = client.get("/health").json()["beacon"]
    assert health == {
        "verified_round": 100,
        "due_round": deadline + 1,
        "lag_rounds": deadline + 1 - 100,
        "lagging": True,
    }
    board = client.get("/v1/runs/run-1/dashboard").json()["beacon"]
    assert board["lagging"] is True and board["lag_rounds"] == deadline + 1 - 100
    assert client.get("/v1/runs/run-1/rounds").json()[0]["commits"] == 1


def test_a_beacon_on_time_is_not_lagging(lagging: tuple[TestClient, LaggingBeacon]) -> None:
    client, _ = lagging
    assert client.get("/health").json()["beacon"]["lagging"] is False


def test_due_round_follows_genesis_and_period(tmp_path: Path) -> None:
    at = float(time_of_round(QUICKNET, 5000)) + 0.5
    client = BeaconClient(["http://127.0.0.1:9"], QUICKNET, tmp_path / "c.sqlite", clock=lambda: at)
    assert client.due_round() == 5000


def test_envelope_expiry_beyond_the_horizon_is_refused(harness: Harness) -> None:
    key = harness.miners[0]
    far = signed(key, "join", join_body(), expiry=2**53 - 1)
    r = harness.client.post("/v1/join", json=far)
    assert (r.status_code, r.json()["error"]) == (400, "expiry_too_far")
    edge = signed(key, "join", join_body(), expiry=100 + MAX_EXPIRY_HORIZON_ROUNDS)
    assert harness.client.post("/v1/join", json=edge).status_code == 200
    # the nonce is pruned once the envelope expires
    harness.tick(MAX_EXPIRY_HORIZON_ROUNDS + 1)
    state = harness.state
    assert state.conn.execute("SELECT COUNT(*) FROM seen_nonces").fetchone()[0] == 0


def test_audit_settings_that_leave_segments_unaudited_are_refused(harness: Harness) -> None:
    doc = manifest_doc("run-2", segments=0)
    r = harness.client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
    assert (r.status_code, r.json()["error"]) == (400, "bad_manifest")
    assert "audit.segments" in r.json()["detail"]


def test_loss_curve_shows_verified_loss_and_labels_self_reported(harness: Harness) -> None:
    run_rounds(harness)
    board = harness.client.get("/v1/runs/run-1/dashboard").json()
    assert [p["heldout_loss"] for p in board["curve"]] == [4.5, 4.0]
    assert all("train_loss" not in p for p in board["curve"])
    assert all("train_loss_self_reported" in p for p in board["curve"])
    # the faulted island's self-reported loss does not enter the round's figure
    state = harness.state
    state.conn.execute("UPDATE commits SET train_loss = 1000 WHERE round = 0 AND hotkey = ?",
                       (harness.miners[2].ss58_address,))  # fmt: skip
    first = harness.client.get("/v1/runs/run-1/rounds").json()[0]
    assert first["train_loss"] == pytest.approx(5.0)


def test_one_islands_claimed_loss_does_not_set_the_rounds_train_loss(harness: Harness) -> None:
    """The train loss is self-reported and never audited: the round's figure is the
    token-weighted median of the claims, so one island claiming 1e6 (an outsider's
    finding: it set the mean to 250,000) moves it only with half the round's tokens."""
    run_rounds(harness)
    honest = harness.client.get("/v1/runs/run-1/rounds").json()[1]["train_loss"]
    harness.state.conn.execute("UPDATE commits SET train_loss = 1e6 WHERE round = 1 AND hotkey = ?",
                               (harness.miners[0].ss58_address,))  # fmt: skip
    claimed = harness.client.get("/v1/runs/run-1/rounds").json()[1]["train_loss"]
    assert claimed < 100 and abs(claimed - honest) < 10, (honest, claimed)


@pytest.mark.parametrize(
    ("points", "median"),
    [([(1.0, 1)], 1.0), ([(1.0, 1), (3.0, 1)], 1.0), ([(5.0, 1), (1.0, 1), (3.0, 1)], 3.0),
     ([(1e6, 1), (2.0, 3)], 2.0), ([(1e6, 3), (2.0, 1)], 1e6)],
)  # fmt: skip
def test_weighted_median(points: list[tuple[float, int]], median: float) -> None:
    from hypertrain.challenge.rounds.views import weighted_median

    assert weighted_median(points) == median
    with pytest.raises(ValueError):
        weighted_median([])
