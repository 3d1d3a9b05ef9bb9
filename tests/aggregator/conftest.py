"""Reuse the challenge service harness and the relay's loopback fixtures; ``witness_harness``:
the service harness with one tape witness required."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hypertrain.challenge.app import create_app
from hypertrain.protocol.identity import Hotkey
from tests.challenge.conftest import Harness, harness, miner_keys
from tests.challenge.helpers import FakeLedger, SteppedBeacon, bearer, make_settings, manifest_doc
from tests.relay.conftest import clock, keys, relay, serve

__all__ = ["clock", "harness", "keys", "miner_keys", "relay", "serve", "witness_harness"]

WITNESS_WAIT = 2  # HYPERTRAIN_WITNESS_WAIT_ROUNDS of ``witness_harness``


@pytest.fixture
def witness_harness(tmp_path: Path, miner_keys: list[Hotkey]) -> Iterator[Harness]:
    """The service harness with one witness required; ``miners[3]`` is its key."""
    settings = make_settings(tmp_path, [k.ss58_address for k in miner_keys],
                             tape_witnesses=1, witness_wait_rounds=WITNESS_WAIT)  # fmt: skip
    beacon, ledger = SteppedBeacon(), FakeLedger()
    with TestClient(create_app(settings, beacon=beacon, ledger=ledger)) as client:
        r = client.post(
            "/admin/v1/runs", json={"manifest": manifest_doc()}, headers=bearer("admin")
        )
        assert r.status_code == 200, r.text
        auditor = Hotkey.from_seed(b"\x55" * 32)
        yield Harness(client, beacon, ledger, miner_keys, miner_keys[3], auditor, tmp_path)
