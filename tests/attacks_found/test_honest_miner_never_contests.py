"""The honest miner's own defence never contests a ``start`` mismatch or an ``unverifiable``.

docs/mechanism.md (Disputes): "Every fault-bearing verdict (``mismatch`` or
``unverifiable``) is a fault only if it survives a dispute or its dispute window closes
undisputed. The judged island (or its ``hypertrain-miner watch --follow``,
automatically, ...) opens a dispute within the verdict's dispute window"; docs/threats.md
(Disputes): a lying ``unverifiable`` and a leaf-0 mismatch are answered by a
``recompute`` dispute; docs/miner.md: "With ``--follow`` it also defends you".

``watch`` contests only ``mismatch`` verdicts: an ``unverifiable`` lie is reported and
never disputed, so it stands when its window closes, faults the honest island (its
unpaid escrow burned, every later reward of the run forfeited), and bars nobody (an
overturned ``unverifiable`` never bars its auditor, and this one is not even
contested). Played with the miner's own watch pass (``--dispute``) against the real
service and a real relay on loopback. (A ``start`` lie, ``first_bad_leaf: 0``, is read as
"no bad leaf" and contested on the first audited segment, which the service refuses
``not_first_difference``: not played here, it needs the island's stored checkpoints.)
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from hypertrain.api.client import ChallengeClient
from hypertrain.evidence.index import CheckpointIndex
from hypertrain.miner.actions import _watch_pass
from hypertrain.miner.config import MinerConfig
from hypertrain.miner.context import RunContext
from hypertrain.miner.report import Reporter
from hypertrain.protocol.identity import Hotkey
from hypertrain.relay.app import create_app
from hypertrain.relay.client import RelayClient
from hypertrain.relay.clock import BeaconClock
from tests.challenge.disputeplay import LEAVES, TREE
from tests.challenge.helpers import (
    AGGREGATOR,
    FakeLedger,
    SteppedBeacon,
    aggregator_split,
    bearer,
    commit_body,
    join_body,
    make_settings,
    manifest_doc,
    signed,
)
from tests.challenge.test_dispute_rules import RULES, THIRD_AUDITOR
from tests.challenge.test_disputes import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    RUN,
    Service,
    _running,
)
from tests.relay import conftest as _relay_fixtures
from tests.relay.conftest import Running
from tests.relay.helpers import NOW_ROUND, Keys
from tests.relay.helpers import make_settings as relay_settings

clock, keys, serve = (  # a real relay on loopback (its own test fixtures)
    _relay_fixtures.clock,
    _relay_fixtures.keys,
    _relay_fixtures.serve,
)
LIAR = AUDITOR
HONEST = ISLANDS[0]
LIES = {"unverifiable": {"result": "unverifiable", "detail": "checkpoint withheld"}}


@pytest.fixture
def relay(
    tmp_path: Path, keys: Keys, clock: BeaconClock, serve: Callable[[FastAPI], Running]
) -> Running:
    """A real relay of this run on loopback (the honest island may upload to it)."""
    return serve(create_app(relay_settings(tmp_path / "relay", keys, run_id=RUN), clock=clock))


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


@pytest.fixture
def three(tmp_path: Path) -> Iterator[Service]:
    yield from three_auditors(tmp_path, audited_segments=2)


def three_auditors(tmp_path: Path, audited_segments: int) -> Iterator[Service]:
    """Three listed auditors (a verdict's jury is the other two), the aggregator's key
    listed as such (it signs the merge, and sits on no jury), no referee."""
    auditors = (LIAR, OTHER_AUDITOR, THIRD_AUDITOR)
    settings = make_settings(
        tmp_path,
        [k.ss58_address for k in ISLANDS],
        worker_hotkeys=frozenset(k.ss58_address for k in (*auditors, AGGREGATOR)),
        aggregator_hotkeys=frozenset({AGGREGATOR.ss58_address}),
    )
    svc = Service(settings, SteppedBeacon(), FakeLedger(), None)  # type: ignore[arg-type]
    with _running(svc):
        doc = manifest_doc(RUN, rate=1.0, segments=audited_segments)
        doc["round"]["audit_window_rounds"] = 20
        doc["dispute"] = {**RULES, "referees": []}
        r = svc.client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
        assert r.status_code == 200, r.text
        yield svc


def _round_0_with_a_lie(
    svc: Service, relay_url: str, lie: dict[str, Any], *, serve: bool = True
) -> str:
    """Round 0 committed (the honest island's evidence at the relay unless ``serve`` is
    false: then no relay runs) and the liar's verdict on the honest island posted."""
    for key in ISLANDS:
        assert svc.post("/v1/join", key, "join", join_body()).status_code == 200
    r = svc.client.post(
        f"/admin/v1/runs/{RUN}/rounds",
        headers=bearer("admin"),
        json={"start_model_sha256": "aa" * 32, "start_model_url": "http://relay/m0"},
    )
    assert r.status_code == 200, r.text
    served = serve_evidence(relay_url, HONEST) if serve else f"{relay_url}/blobs/{'ee' * 32}"
    for key in ISLANDS:
        body = {
            **commit_body(0),
            "checkpoint_root": TREE.root_hex,
            "checkpoint_url": served if key == HONEST else f"{relay_url}/blobs/{'ee' * 32}",
        }
        assert svc.post("/v1/commit", key, "commit", body).status_code == 200, body
    svc.tick(4)
    assigned = svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/0/assignments", headers=bearer("worker")
    ).json()
    mine = next(a["body"] for a in assigned if a["body"]["hotkey"] == HONEST.ss58_address)
    verdict = {**mine, "update_checked": True, **lie}
    verdict.pop("selection_beacon_round")
    if lie["result"] == "unverifiable":
        verdict.pop("update_checked")
    r = svc.client.post(
        "/worker/v1/verdict", headers=bearer("worker"), json=signed(LIAR, "verdict", verdict, RUN)
    )
    assert r.status_code == 200, r.text
    verdict_id: str = r.json()["verdict_id"]
    return verdict_id


def _watch_once(svc: Service, relay_url: str, key: Hotkey, state_dir: Path) -> None:
    """One ``hypertrain-miner watch --dispute`` pass of the honest island."""
    service = ChallengeClient("http://testserver", http=svc.client)
    config = MinerConfig(
        service_url="http://testserver", relay_url=relay_url, run_id=RUN, state_dir=str(state_dir)
    )
    ctx = RunContext(config, service, service.manifest(RUN))
    args = argparse.Namespace(dispute=True, follow=False)
    with RelayClient(relay_url, key, RUN) as relay_client:
        _watch_pass(ctx, key, service, relay_client, {}, {}, Reporter("miner"), args)


@pytest.mark.parametrize("lie", sorted(LIES))
def test_the_honest_miners_watch_contests_every_fault_bearing_lie(
    three: Service, relay: Running, tmp_path: Path, lie: str
) -> None:
    """Proves ``watch --dispute`` opens a dispute against a false ``unverifiable`` on its
    own round (a ``recompute`` dispute: no replay is needed to open it)."""
    verdict_id = _round_0_with_a_lie(three, relay.url, LIES[lie])
    _watch_once(three, relay.url, HONEST, tmp_path / "miner-state")
    disputes = three.client.get("/v1/disputes", params={"run_id": RUN}).json()
    contested = [d for d in disputes if d["verdict_id"] == verdict_id]
    assert contested, (
        f"the honest island's watch pass left the liar's {lie} verdict undisputed; it stands"
        " when its window closes"
    )


def test_one_lying_auditor_among_honest_ones_cannot_fault_an_honest_island(
    three: Service, relay: Running, tmp_path: Path
) -> None:
    """Proves the honest-majority claim end to end with the shipped island software: the two
    honest auditors judge ``match``, one liar signs ``unverifiable``, the island runs its
    ``watch --dispute`` pass every few beacon rounds, and the round settles without
    faulting it."""
    svc = three
    _round_0_with_a_lie(svc, relay.url, LIES["unverifiable"])
    assigned = svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/0/assignments", headers=bearer("worker")
    ).json()
    for body in (a["body"] for a in assigned):
        for auditor in (OTHER_AUDITOR, THIRD_AUDITOR):  # the honest majority: every byte served
            if body["hotkey"] == HONEST.ss58_address or auditor == OTHER_AUDITOR:
                verdict = {**body, "result": "match", "update_checked": True}
                verdict.pop("selection_beacon_round")
                r = svc.client.post(
                    "/worker/v1/verdict",
                    headers=bearer("worker"),
                    json=signed(auditor, "verdict", verdict, RUN),
                )
                assert r.status_code == 200, r.text
    for _ in range(10):  # the island's watch keeps looking while the windows run
        _watch_once(svc, relay.url, HONEST, tmp_path / "miner-state")
        svc.tick(3)
    _merge_round_0(svc)
    faulted = [f for f in svc.ledger.faults if f[2] == HONEST.ss58_address]
    assert not faulted, (
        "two honest auditors judged 'match', one liar signed 'unverifiable', the island's"
        f" watch never disputed it: the honest island is faulted {faulted}"
    )


def _merge_round_0(svc: Service) -> None:
    tape = {
        "round": 0,
        "start_model_sha256": "aa" * 32,
        "new_model_sha256": "bb" * 32,
        "new_model_url": "u",
        "outer_state_sha256": "cc" * 32,
        "tape_sha256": "dd" * 32,
        **aggregator_split(svc.client, RUN, 0, [k.ss58_address for k in ISLANDS]),
    }
    m = svc.client.post(
        "/worker/v1/merge",
        headers=bearer("worker"),
        json=signed(AGGREGATOR, "merge-tape", tape, RUN),
    )
    assert m.status_code == 200, m.text
    svc.tick(40)  # far past the round's dispute window: it settles
