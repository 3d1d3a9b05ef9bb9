"""The real auditor runner against the real service: every assignment ends in a verdict.

Four islands commit to one round of a real challenge service (in-process app): two
train honestly, one commits a checkpoint reference that is not a blob address, one
publishes a checkpoint index of deeply nested JSON. The runner posts a verdict for
every assignment: ``match`` for the honest islands, ``unverifiable`` for the two that
cannot show their work, and the service records those two as faults (not paid, not
merged), while the honest islands keep their tokens.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import pytest

from hypertrain.aggregator.collect import faulty_hotkeys
from hypertrain.api.client import ChallengeClient
from hypertrain.auditor.follow import follow
from hypertrain.auditor.runner import Auditor, RoundProgress, audit_round
from hypertrain.challenge.settlement.settle import verdict_faults
from hypertrain.evidence.verify import verify_manifest, verify_round_open
from tests.auditor.islands import MemoryRelay, inject_moments, publish_round
from tests.auditor.world import RUN_ID, World, make_world
from tests.challenge.conftest import Harness, harness, miner_keys  # noqa: F401
from tests.challenge.helpers import DEVICE_CLASS, GOOD_HASH, bearer, join_body, signed


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("network"))


def _start_run(h: Harness, world: World) -> tuple[ChallengeClient, World]:
    doc = world.manifest.model_dump(mode="json")
    doc.pop("coordinator")
    doc["selfcheck_reference"] = {DEVICE_CLASS: GOOD_HASH}
    r = h.client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
    assert r.status_code == 200, r.text
    client = ChallengeClient("http://testserver", worker_token="w" * 32, http=h.client)
    manifest = verify_manifest(client.manifest_envelope(RUN_ID), RUN_ID, h.state.coordinator)
    for key in h.miners:
        body = join_body()
        body["layout"]["micro_batch_size"] = world.manifest.round.layout.micro_batch_size
        r = h.client.post("/v1/join", json=signed(key, "join", body, run_id=RUN_ID))
        assert r.status_code == 200 and r.json()["admitted"], r.text
    r = h.client.post(
        f"/admin/v1/runs/{RUN_ID}/rounds",
        headers=bearer("admin"),
        json={"start_model_sha256": world.model_sha, "start_model_url": "http://relay/m"},
    )
    assert r.status_code == 200, r.text
    return client, dataclasses.replace(world, manifest=manifest)


def _commit(h: Harness, key: Any, body: dict[str, Any]) -> None:
    r = h.client.post("/v1/commit", json=signed(key, "commit", body, run_id=RUN_ID))
    assert r.status_code == 200, r.text


def test_malformed_references_get_unverifiable_and_others_still_get_verdicts(
    harness: Harness,  # noqa: F811
    world: World,
    tmp_path: Path,
) -> None:
    h = harness
    client, world = _start_run(h, world)
    relay = MemoryRelay()
    relay.put(world.model_blob)
    record = verify_round_open(client.round_detail(RUN_ID, 0).open, world.manifest, 0)
    honest_a, bad_ref, honest_b, bad_index = h.miners
    published = {}
    for key in (honest_a, honest_b):
        pub = publish_round(world, relay, key, [record], tmp_path / key.ss58_address[:8])
        _commit(h, key, pub.commit.model_dump(mode="json"))
        published[key.ss58_address] = pub
    template = next(iter(published.values())).commit
    nested = relay.put(b"[" * 200_000 + b"]" * 200_000)
    for key, url in (
        (bad_ref, "http://relay/blobs/../../etc/passwd"),
        (bad_index, f"http://relay/blobs/{nested}"),
    ):
        digest = hashlib.sha256(key.public_key).hexdigest()
        body = template.model_copy(update={"checkpoint_root": digest, "checkpoint_url": url})
        _commit(h, key, body.model_dump(mode="json"))

    h.tick(2)  # every island committed: the selection is the next beacon round
    detail = client.round_detail(RUN_ID, 0)
    assert detail.phase == "audit" and len(detail.assignments) == 4
    auditor = Auditor(client, relay, h.auditor, world.manifest, world.dataset_dir)  # type: ignore[arg-type]
    events: list[tuple[str, dict[str, Any]]] = []
    progress = RoundProgress()
    emit = lambda e, **f: events.append((e, f))  # noqa: E731
    # the relay cannot be reached for one honest island: that is not the island's fault,
    # so it gets no verdict yet, and the other three are still judged and posted
    index_sha = published[honest_b.ss58_address].commit.checkpoint_url.rsplit("/", 1)[-1]
    relay.unreachable = {index_sha}
    first = audit_round(auditor, 0, emit, progress)
    assert (len(first), progress.unfinished) == (3, 1), events
    assert [f["assignment"] for e, f in events if e == "error"] == [honest_b.ss58_address]
    # ``follow`` retries it at every pass while the relay is away: a pass a peer was away
    # for does not count against the round's attempts (the round's phase bounds the wait)
    polls = iter(range(4))
    before = len(events)
    follow(auditor, poll_s=0, stop=lambda: next(polls, None) is None, emit=emit, max_attempts=2)
    retried = [f for e, f in events[before:] if e == "error"]
    assert [f["assignment"] for f in retried] == [honest_b.ss58_address] * 4
    assert (progress.attempts, progress.away) == (0, 1)
    relay.unreachable = set()
    again = audit_round(auditor, 0, emit, progress)  # the next pass retries only that one
    assert (len(again), progress.unfinished, progress.attempts) == (1, 0, 1)
    results = {f["hotkey"]: f["result"] for e, f in events if e == "verdict"}
    assert len(first) + len(again) == 4
    assert results == {
        honest_a.ss58_address: "match",
        honest_b.ss58_address: "match",
        bad_ref.ss58_address: "unverifiable",
        bad_index.ss58_address: "unverifiable",
    }
    # the service recorded every verdict; the two that cannot show their work are faults
    stored = client.round_detail(RUN_ID, 0).verdicts
    assert len(stored) == 4
    faulty = {bad_ref.ss58_address, bad_index.ss58_address}
    assert faulty_hotkeys(client.round_detail(RUN_ID, 0), world.manifest) == faulty
    assert set(verdict_faults(h.state.conn, RUN_ID, 0)) == faulty  # settlement pays neither


def test_island_that_seeds_its_own_adam_moments_is_not_merged_or_paid(
    harness: Harness,  # noqa: F811
    world: World,
    tmp_path: Path,
) -> None:
    h = harness
    client, world = _start_run(h, world)
    relay = MemoryRelay()
    relay.put(world.model_blob)
    record = verify_round_open(client.round_detail(RUN_ID, 0).open, world.manifest, 0)
    honest, attacker = h.miners[:2]
    pub = publish_round(world, relay, honest, [record], tmp_path / "honest")
    _commit(h, honest, pub.commit.model_dump(mode="json"))
    steered = publish_round(
        world, relay, attacker, [record], tmp_path / "attacker", tamper=inject_moments(0.05)
    )
    _commit(h, attacker, steered.commit.model_dump(mode="json"))
    h.tick(world.manifest.round.commit_window_rounds + 1)
    auditor = Auditor(client, relay, h.auditor, world.manifest, world.dataset_dir)  # type: ignore[arg-type]
    outcomes = audit_round(auditor, 0, lambda e, **f: None)
    assert sorted(o.result for o in outcomes) == ["match", "mismatch"]
    detail = client.round_detail(RUN_ID, 0)
    assert faulty_hotkeys(detail, world.manifest) == {attacker.ss58_address}  # not merged
    assert set(verdict_faults(h.state.conn, RUN_ID, 0)) == {attacker.ss58_address}  # not paid
