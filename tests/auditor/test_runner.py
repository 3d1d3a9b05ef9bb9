"""The auditor's judge on verified records: honest, withheld blobs, unsigned commits."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from hypertrain.auditor.runner import Auditor
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.index import CheckpointIndex, upload_deadline
from hypertrain.evidence.inputs import load_samples, round_sample_ids
from hypertrain.evidence.verify import verify_round_open
from hypertrain.miner.island import train_round
from hypertrain.protocol.envelope import Envelope, seal
from hypertrain.protocol.messages import AuditAssignment, Commit
from hypertrain.relay.errors import NotFoundError
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.state import init_state
from hypertrain.trainer.update import build_update, next_round_state
from tests.auditor.world import ISLANDS, RUN_ID, World, make_world


class MemoryRelay:
    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def put(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        self.blobs[sha] = data
        return sha

    def get(self, sha256: str, *, max_bytes: int = 1 << 32) -> bytes:
        if sha256 not in self.blobs:
            raise NotFoundError(sha256)
        return self.blobs[sha256]


class BeaconClock:
    """The service as far as the auditor's upload wait sees it: the beacon round only.

    Each call advances one round, so an auditor polling for a missing checkpoint reaches
    the deadline after a bounded number of polls; ``on_poll`` lets a test upload late."""

    def __init__(self, start: int, on_poll: Any = None) -> None:
        self.round, self.on_poll, self.polls = start, on_poll, 0

    def beacon_round(self) -> int:
        self.polls += 1
        if self.on_poll is not None:
            self.on_poll(self.polls)
        self.round += 1
        return self.round


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("world"))


def _published(world: World, tmp: Path) -> tuple[MemoryRelay, dict[str, Any], CheckpointIndex]:
    relay, island = MemoryRelay(), ISLANDS[0]
    relay.put(world.model_blob)
    opened = world.round_open(0, [island.ss58_address]).model_dump()
    record = verify_round_open(opened, world.manifest, 0)
    config = TrainConfig.from_manifest(world.manifest)
    ids = round_sample_ids(world.manifest, world.dataset, [record], island.ss58_address)
    params = decode_model_blob(world.model_blob, world.manifest.model)
    start = next_round_state(init_state(config.state_config(), world.manifest.seed), params, None)
    result = train_round(start, config, load_samples(world.dataset, ids), tmp)
    update = build_update(params, result.final, world.manifest.compression)
    blobs = tuple(relay.put(p.read_bytes()) for p in result.checkpoint_paths)
    index = CheckpointIndex(0, tuple(x.hex() for x in result.leaves), blobs)
    index_sha, update_sha = relay.put(index.to_bytes()), relay.put(update.data)
    body = Commit(
        round=0,
        checkpoint_root=result.root.hex(),
        leaf_count=3,
        update_sha256=update_sha,
        update_bytes=len(update.data),
        tokens=result.tokens,
        update_url=f"http://relay/blobs/{update_sha}",
        checkpoint_url=f"http://relay/blobs/{index_sha}",
    )
    commit = seal(
        island,
        domain="commit",
        run_id=RUN_ID,
        body=body.model_dump(mode="json"),
        expiry_round=10**9,
    )
    return relay, Records(Envelope.model_validate(opened), [commit]), index


@dataclass(frozen=True)
class Records:
    """The two records of a round that an auditor reads."""

    open: Envelope
    commits: list[Envelope]


def _auditor(world: World, relay: MemoryRelay, clock: BeaconClock | None = None) -> Auditor:
    service = clock or BeaconClock(10**6)  # far past every deadline: missing = withheld
    return Auditor(service, relay, ISLANDS[2], world.manifest, world.dataset_dir, upload_poll_s=0)  # type: ignore[arg-type]


def test_judge_matches_and_withheld_blobs_are_unverifiable(world: World, tmp_path: Path) -> None:
    relay, detail, index = _published(world, tmp_path)
    assignment = AuditAssignment(
        round=0, hotkey=ISLANDS[0].ss58_address, segments=[0, 1], selection_beacon_round=1
    )
    auditor = _auditor(world, relay)
    assert auditor.judge(detail, assignment).result == "match"
    del relay.blobs[index.blobs[1]]
    outcome = auditor.judge(detail, assignment)
    assert outcome.result == "unverifiable" and "not available" in outcome.detail
    relay.blobs.clear()
    relay.put(world.model_blob)
    withheld = auditor.judge(detail, assignment)
    assert withheld.result == "unverifiable" and "checkpoint index" in withheld.detail


def test_commit_signed_by_another_key_is_refused(world: World, tmp_path: Path) -> None:
    relay, detail, _ = _published(world, tmp_path)
    lie = detail.commits[0]
    forged = lie.model_copy(update={"body": {**lie.body, "tokens": 1}})
    assignment = AuditAssignment(
        round=0, hotkey=ISLANDS[0].ss58_address, segments=[0], selection_beacon_round=1
    )
    with pytest.raises(VerificationError, match="signature"):
        _auditor(world, relay).judge(replace(detail, commits=[forged]), assignment)
    with pytest.raises(VerificationError, match="no commit"):
        _auditor(world, relay).judge(replace(detail, commits=[]), assignment)


def test_selected_checkpoint_uploaded_before_the_deadline_is_awaited(
    world: World, tmp_path: Path
) -> None:
    """Islands upload selected checkpoints after the selection: the auditor waits for them."""
    relay, detail, index = _published(world, tmp_path)
    held = {k: relay.blobs.pop(k) for k in index.blobs}  # the island still holds them all
    assignment = AuditAssignment(
        round=0, hotkey=ISLANDS[0].ss58_address, segments=[1], selection_beacon_round=5
    )
    deadline = upload_deadline(5, world.manifest.round.audit_window_rounds)

    def late_upload(polls: int) -> None:
        if polls == 3:  # a few beacon rounds after the selection, still before the deadline
            relay.blobs[index.blobs[1]] = held[index.blobs[1]]

    clock = BeaconClock(5, late_upload)
    outcome = _auditor(world, relay, clock).judge(detail, assignment)
    assert outcome.result == "match", outcome.detail
    assert clock.round <= deadline
    # only the selected segment's start checkpoint was ever needed
    assert index.blobs[0] not in relay.blobs and index.blobs[2] not in relay.blobs


def test_segment_zero_needs_no_uploaded_checkpoint(world: World, tmp_path: Path) -> None:
    """Segment 0 replays from the derived start state: islands never upload checkpoint 0."""
    relay, detail, index = _published(world, tmp_path)
    del relay.blobs[index.blobs[0]]
    last = len(index.blobs) - 2  # the final segment (the last blob is the end state)
    assignment = AuditAssignment(
        round=0, hotkey=ISLANDS[0].ss58_address, segments=[0, last], selection_beacon_round=5
    )
    outcome = _auditor(world, relay, BeaconClock(5)).judge(detail, assignment)
    assert outcome.result == "match", outcome.detail


def test_selected_checkpoint_withheld_past_the_deadline_is_a_fault(
    world: World, tmp_path: Path
) -> None:
    relay, detail, index = _published(world, tmp_path)
    for k in index.blobs:
        del relay.blobs[k]
    assignment = AuditAssignment(
        round=0, hotkey=ISLANDS[0].ss58_address, segments=[1], selection_beacon_round=5
    )
    clock = BeaconClock(5)
    outcome = _auditor(world, relay, clock).judge(detail, assignment)
    assert outcome.result == "unverifiable" and "not available" in outcome.detail
    assert clock.round > upload_deadline(5, world.manifest.round.audit_window_rounds)


class ArrivalRelay(MemoryRelay):
    """A relay that keeps the beacon round each blob first arrived at, like the real one."""

    def __init__(self, clock: BeaconClock) -> None:
        super().__init__()
        self.clock, self.arrived = clock, dict[str, int]()

    def arrival_round(self, sha256: str) -> int | None:
        if sha256 not in self.blobs:
            raise NotFoundError(sha256)
        return self.arrived.get(sha256)


def test_a_checkpoint_uploaded_after_the_deadline_is_withheld_however_late_one_looks(
    world: World, tmp_path: Path
) -> None:
    """Whether a selected checkpoint was in time is the relay's arrival record, one fact for
    the auditor and every re-audit: an auditor that looks after the deadline does not take
    a late upload (an outsider's finding), and one uploaded in time still matches."""
    published, detail, index = _published(world, tmp_path)
    deadline = upload_deadline(5, world.manifest.round.audit_window_rounds)
    assignment = AuditAssignment(
        round=0, hotkey=ISLANDS[0].ss58_address, segments=[1], selection_beacon_round=5
    )
    for arrived, result in ((deadline + 3, "unverifiable"), (deadline, "match")):
        clock = BeaconClock(deadline + 5)  # this auditor looks after the deadline
        relay = ArrivalRelay(clock)
        relay.blobs = dict(published.blobs)
        relay.arrived[index.blobs[1]] = arrived
        outcome = _auditor(world, relay, clock).judge(detail, assignment)  # type: ignore[arg-type]
        assert outcome.result == result, outcome.detail
        if result == "unverifiable":
            assert "after the upload deadline" in outcome.detail
