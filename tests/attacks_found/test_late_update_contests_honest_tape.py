"""A withheld-then-late update must not make the honest witness contest the honest tape.

The attack (found on a devnet): an admitted island, in a round it is not audited,
commits its real update hash but does not upload the blob; the honest aggregator's tape
excludes it as ``missing_blob``; right after the tape the island uploads the blob (the
relay accepts it late); the honest witness recomputed the tape with the blob now
available, disagreed (``tape.total_tokens``), and the round was contested: never paid,
its merge dropped from the chain, and ``verify-tape`` blamed the honest aggregator.

The defence (docs/mechanism.md, "Availability is judged once"): the relay keeps each
blob's first-arrival beacon round and publishes it; the tape names its round's upload
deadline (``updates_by_round``, from the public audit selection), and every party that
recomputes the tape counts an update only if the relay's record shows it by then.
Played against the real service, a real relay on loopback, the real aggregator and the
real witness; the relay's clock follows the service's stepped beacon.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from hypertrain.aggregator import chain
from hypertrain.aggregator.availability import UndecidedError
from hypertrain.aggregator.blobs import RelayBlobs
from hypertrain.aggregator.runner import Aggregator
from hypertrain.aggregator.tape import decode_tape
from hypertrain.aggregator.verify import verify_tape
from hypertrain.aggregator.witness import Witness, inputs_difference
from hypertrain.api.client import ChallengeClient
from hypertrain.challenge.app import create_app
from hypertrain.protocol.deadlines import updates_by_round
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.relay.app import create_app as create_relay
from hypertrain.relay.client import RelayClient
from hypertrain.relay.clock import BeaconClock
from hypertrain.relay.settings import RelaySettings
from hypertrain.trainer.codec import encode_int8
from tests.aggregator.helpers import delta
from tests.challenge.conftest import Harness
from tests.challenge.helpers import (
    TOKENS,
    TOKENS_PER_MICRO_BATCH,
    FakeLedger,
    SteppedBeacon,
    bearer,
    join_body,
    make_settings,
    manifest_doc,
    signed,
)
from tests.relay import conftest as _relay_fixtures
from tests.relay.conftest import Running

serve = _relay_fixtures.serve  # a real relay on loopback (its own test fixture)
AGG = Hotkey.from_seed(b"\x66" * 32)
WITNESS = Hotkey.from_seed(b"\x71" * 32)
WORKER = {"Authorization": f"Bearer {TOKENS['worker']}"}
RUN = "run-1"


@pytest.fixture
def world(tmp_path: Path, serve: Callable[[FastAPI], Running]) -> Iterator[tuple[Harness, Running]]:
    """The service (one witness required; round 0 audits every newcomer, later rounds
    nobody) and a relay whose beacon clock is the service's beacon."""
    miner_keys = [Hotkey.from_seed(bytes([i + 1]) * 32) for i in range(3)]
    registered = [k.ss58_address for k in [*miner_keys, WITNESS]]
    settings = make_settings(
        tmp_path, registered, tape_witnesses=1, aggregator_hotkeys=frozenset({AGG.ss58_address})
    )
    beacon, ledger = SteppedBeacon(), FakeLedger()
    allow = tmp_path / "allow.json"
    allow.write_text(json.dumps({"hotkeys": dict.fromkeys(registered, 1)}))
    relay_settings = RelaySettings(
        storage=str(tmp_path / "relay" / "blobs"), state_dir=tmp_path / "relay" / "state",
        run_id=RUN, allow_list=allow, coordinators=frozenset({AGG.ss58_address}),
    )  # fmt: skip
    # round r is current during [r - 1, r) seconds after genesis 0: the beacon's round
    clock = BeaconClock(genesis_unix=0, period_s=1, now=lambda: beacon.round - 0.5)
    relay = serve(create_relay(relay_settings, clock=clock))
    with TestClient(create_app(settings, beacon=beacon, ledger=ledger)) as client:
        r = client.post(
            "/admin/v1/runs", json={"manifest": manifest_doc(rate=0.0)}, headers=bearer("admin")
        )
        assert r.status_code == 200, r.text
        auditor = Hotkey.from_seed(b"\x55" * 32)
        yield Harness(client, beacon, ledger, miner_keys, WITNESS, auditor, tmp_path), relay


def _service(h: Harness) -> ChallengeClient:
    return ChallengeClient(
        "http://testserver", worker_token=TOKENS["worker"], admin_token=TOKENS["admin"],
        http=h.client,
    )  # fmt: skip


def _blobs(h: Harness, relay: Running, key: Hotkey, cache: str) -> RelayBlobs:
    client = RelayClient(relay.url, key, RUN)
    return RelayBlobs(client, h.tmp / cache, expiry=lambda: h.beacon.round + 10)


def _upload(h: Harness, relay: Running, key: Hotkey, data: bytes, index: int) -> None:
    with RelayClient(relay.url, key, RUN) as client:
        client.put(data, kind="update", round=index, expiry_round=h.beacon.round + 10)


def _commit(h: Harness, key: Hotkey, data: bytes, index: int, sha: str) -> None:
    root = hashlib.sha256(key.public_key).hexdigest()  # its own: a shared one forces audits
    body = {"round": index, "checkpoint_root": root, "leaf_count": 5,
            "update_sha256": sha, "update_bytes": len(data), "tokens": TOKENS_PER_MICRO_BATCH,
            "update_url": f"relay:{sha}", "train_loss": 3.0}  # fmt: skip
    assert h.client.post("/v1/commit", json=signed(key, "commit", body)).status_code == 200


def _update(m: RunManifest, seed: int) -> tuple[bytes, str]:
    data = encode_int8(delta(m, seed), m.compression.block_size)
    return data, hashlib.sha256(data).hexdigest()


def _round_zero(h: Harness, relay: Running, agg: Aggregator, witness: Witness) -> RunManifest:
    """Round 0 (every island audited, all match) merged, witnessed and final."""
    for key in h.miners[:3]:
        assert h.client.post("/v1/join", json=signed(key, "join", join_body())).status_code == 200
    m = agg.service.manifest(RUN)
    agg.step(m, open_rounds=True)
    for i, key in enumerate(h.miners[:3]):
        data, sha = _update(m, i)
        _upload(h, relay, key, data, 0)
        _commit(h, key, data, 0, sha)
    h.tick(1)
    for a in agg.service.round_detail(RUN, 0).assignments:
        good = {"round": 0, "hotkey": a.body["hotkey"], "segments": a.body["segments"],
                "result": "match", "update_checked": True}  # fmt: skip
        r = h.client.post("/worker/v1/verdict", json=signed(h.auditor, "verdict", good),
                          headers=WORKER)  # fmt: skip
        assert r.status_code == 200, r.text
    h.tick(3)  # past the round's upload deadline on the relay's clock
    assert agg.step(m, open_rounds=False) == 1
    h.tick(5)
    assert witness.step(m) == 1
    h.tick(1)
    assert agg.service.round_detail(RUN, 0).phase == "final"
    agg.step(m, open_rounds=True)  # round 1 opens on round 0's witnessed model
    return m


def _play(world: tuple[Harness, Running], *, late_by: int) -> tuple[Harness, Aggregator, Witness]:
    """Round 1: two honest islands upload and commit; the third commits and withholds,
    then uploads ``late_by`` beacon rounds after the merge (0: right after the tape)."""
    h, relay = world
    events: list[dict[str, object]] = []
    said: list[dict[str, object]] = []
    agg = Aggregator(_service(h), _blobs(h, relay, AGG, "agg-cache"), AGG, RUN, h.tmp / "agg",
                     said.append)  # fmt: skip
    witness = Witness(_service(h), _blobs(h, relay, WITNESS, "w-cache"), WITNESS, RUN,
                      events.append)  # fmt: skip
    m = _round_zero(h, relay, agg, witness)
    attacker = h.miners[2]
    withheld, withheld_sha = _update(m, 12)
    for i, key in enumerate(h.miners[:2]):
        data, sha = _update(m, 10 + i)
        _upload(h, relay, key, data, 1)
        _commit(h, key, data, 1, sha)
    _commit(h, attacker, withheld, 1, withheld_sha)  # the real hash, never uploaded (yet)
    h.tick(1)
    detail = agg.service.round_detail(RUN, 1)
    assert detail.assignments == [] and detail.selection_beacon_round is not None
    h.tick(2)
    assert agg.service.round_detail(RUN, 1).phase == "merge"
    if h.beacon.round <= updates_by_round(detail.selection_beacon_round):
        with pytest.raises(UndecidedError):  # absence is no fact before the deadline
            agg.merge_round(m, 1)
        assert agg.step(m, open_rounds=False) == 0  # the step waits, and says so
        assert (said[-1]["event"], said[-1]["for"]) == ("waiting", "upload_deadline")
        h.tick(updates_by_round(detail.selection_beacon_round) + 1 - h.beacon.round)
    assert agg.step(m, open_rounds=False) == 1
    record = agg.service.round_detail(RUN, 1).current_merge()
    assert record is not None
    tape = decode_tape(agg.store.get(record.tape_sha256))
    assert tape.settlement_exclusions() == {attacker.ss58_address: "missing_blob"}
    h.tick(late_by)
    _upload(h, relay, attacker, withheld, 1)  # accepted late: it is now on the relay
    return h, agg, witness


def test_an_update_uploaded_after_the_tape_does_not_make_the_honest_witness_contest(
    world: tuple[Harness, Running],
) -> None:
    h, agg, witness = _play(world, late_by=0)
    m = agg.service.manifest(RUN)
    assert witness.step(m) == 1
    detail = agg.service.round_detail(RUN, 1)
    assert detail.witnesses is not None
    assert (detail.witnesses.status, detail.witnesses.first_difference) == ("witnessed", None)
    # verify-tape from a fresh cache, with the blob on the relay: the tape verifies
    record = detail.current_merge()
    assert record is not None
    fresh = _blobs(h, world[1], WITNESS, "verify-cache")
    tape = decode_tape(fresh.get(record.tape_sha256))
    report = verify_tape(tape, fresh)
    assert report.identical, report.first_difference
    # a tape that moves its deadline (to let the late update in) is caught on its inputs
    moved = tape.model_copy(update={"updates_by_round": h.beacon.round})
    previous = chain.previous_outer(lambda w: agg.service.round_detail(RUN, w), 1, m)
    found = inputs_difference(moved, detail, m, previous) or ""
    assert found.startswith("tape.updates_by_round")
    h.tick(5)
    paid = h.ledger.settled[(RUN, 1)]
    assert set(paid) == {k.ss58_address for k in h.miners[:2]}  # the round is paid


def test_the_late_update_stays_missing_however_late_it_is_asked(
    world: tuple[Harness, Running],
) -> None:
    """The arrival record never moves: many rounds later, a recomputation still
    excludes the late update, with the round it arrived at."""
    h, agg, witness = _play(world, late_by=7)
    record = agg.service.round_detail(RUN, 1).current_merge()
    assert record is not None
    fresh = _blobs(h, world[1], WITNESS, "late-cache")
    tape = decode_tape(fresh.get(record.tape_sha256))
    report = verify_tape(tape, fresh)
    assert report.identical, report.first_difference
    late = next(e for e in report.recomputed.tape.excluded if e.reason == "missing_blob")
    assert late.hotkey == h.miners[2].ss58_address
    assert late.detail.endswith(f"did not reach the relay by beacon round {tape.updates_by_round}")
    assert fresh.relay.arrival_round(late.update_sha256) == h.beacon.round  # the late arrival
    assert witness.step(agg.service.manifest(RUN)) == 1
    view = agg.service.round_detail(RUN, 1).witnesses
    assert view is not None and view.status == "witnessed"
