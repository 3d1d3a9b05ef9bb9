"""Fixtures: a service app on a stepped beacon with a fake ledger and file metagraph."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hypertrain.challenge.app import _poll_beacon, create_app
from hypertrain.challenge.state import ServiceState
from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import FakeLedger, SteppedBeacon, bearer, make_settings, manifest_doc


@dataclass
class Harness:
    client: TestClient
    beacon: SteppedBeacon
    ledger: FakeLedger
    miners: list[Hotkey]
    outsider: Hotkey
    auditor: Hotkey
    tmp: Path

    @property
    def state(self) -> ServiceState:
        state: ServiceState = self.client.app.state.service  # type: ignore[attr-defined]
        return state

    def tick(self, rounds: int = 1) -> None:
        """Advance the beacon and let the service act on it now."""
        self.beacon.round += rounds
        self.client.portal.call(_poll_beacon, self.state)  # type: ignore[union-attr]


@pytest.fixture(scope="session")
def miner_keys() -> list[Hotkey]:
    return [Hotkey.from_seed(bytes([i + 1]) * 32) for i in range(4)]


@pytest.fixture
def harness(tmp_path: Path, miner_keys: list[Hotkey]) -> Iterator[Harness]:
    outsider = Hotkey.from_seed(b"\x77" * 32)
    auditor = Hotkey.from_seed(b"\x55" * 32)
    settings = make_settings(tmp_path, [k.ss58_address for k in miner_keys])
    beacon, ledger = SteppedBeacon(), FakeLedger()
    app = create_app(settings, beacon=beacon, ledger=ledger)
    with TestClient(app) as client:
        h = Harness(client, beacon, ledger, miner_keys, outsider, auditor, tmp_path)
        response = client.post(
            "/admin/v1/runs", json={"manifest": manifest_doc()}, headers=bearer("admin")
        )
        assert response.status_code == 200, response.text
        yield h
