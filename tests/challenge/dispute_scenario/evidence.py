"""An honest island's evidence at a real relay on loopback (the ``relay`` fixture), and a
lie about it."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from hypertrain.evidence.index import CheckpointIndex
from hypertrain.protocol.identity import Hotkey
from hypertrain.relay.app import create_app as create_relay
from hypertrain.relay.client import RelayClient
from hypertrain.relay.clock import BeaconClock
from tests.challenge.dispute_scenario.cast import AUDITOR, ISLANDS, RUN
from tests.challenge.dispute_scenario.rounds import commit_round_0, post_verdict
from tests.challenge.dispute_scenario.runs import Played
from tests.challenge.disputeplay import LEAVES
from tests.relay.conftest import Running
from tests.relay.helpers import NOW_ROUND, Keys
from tests.relay.helpers import make_settings as relay_settings

LIAR, HONEST = AUDITOR, ISLANDS[0]
WITHHELD = {"result": "unverifiable", "detail": "checkpoint withheld"}  # a lie, when served


@pytest.fixture
def relay(
    tmp_path: Path, keys: Keys, clock: BeaconClock, serve: Callable[[FastAPI], Running]
) -> Running:
    """A real relay of this run on loopback (the honest island may upload to it)."""
    return serve(create_relay(relay_settings(tmp_path / "relay", keys, run_id=RUN), clock=clock))


def serve_evidence(relay_url: str, key: Hotkey, round_index: int = 0) -> str:
    """What an honest island serves: its checkpoint index and every checkpoint an audit may
    select (made-up bytes ending in their leaf); returns the index's URL."""
    blobs = [LEAVES[k] + LEAVES[k] for k in range(len(LEAVES))]
    index = CheckpointIndex(
        round_index,
        tuple(leaf.hex() for leaf in LEAVES),
        tuple(hashlib.sha256(b).hexdigest() for b in blobs),
    )
    expiry = NOW_ROUND + 10
    with RelayClient(relay_url, key, RUN) as client:
        for blob in blobs[1:]:  # segment 0 starts from the public start state
            client.put(blob, kind="checkpoint", round=round_index, expiry_round=expiry)
        return client.url(
            client.put(index.to_bytes(), kind="other", round=round_index, expiry_round=expiry)
        )


def round_0_with_a_lie(
    svc: Played, relay_url: str, lie: Mapping[str, Any], *, serve: bool = True
) -> str:
    """Round 0 committed (the :data:`HONEST` island's evidence at the relay unless ``serve``
    is false: then no relay runs) and :data:`LIAR`'s verdict ``lie`` on it posted (a
    ``match`` or ``mismatch`` says the update was checked); the verdict's id."""
    junk = f"{relay_url}/blobs/{'ee' * 32}"
    served = serve_evidence(relay_url, HONEST) if serve else junk
    commit_round_0(svc, {k.ss58_address: served if k == HONEST else junk for k in ISLANDS})
    fields = {key: value for key, value in lie.items() if key != "result"}
    if lie["result"] != "unverifiable":
        fields = {"update_checked": True, **fields}
    r = post_verdict(svc, LIAR, HONEST, lie["result"], **fields)
    assert r.status_code == 200, r.text
    verdict_id: str = r.json()["verdict_id"]
    return verdict_id
