"""The auditor's judge on verified records: honest, withheld blobs, unsigned commits."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hypertrain.auditor.replay import audit_island
from hypertrain.auditor.runner import Auditor, judge_and_post
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.index import CheckpointIndex, upload_deadline
from hypertrain.protocol.messages import AuditAssignment
from hypertrain.relay.errors import NotFoundError
from tests.auditor.islands import BeaconClock, MemoryRelay, published_round
from tests.auditor.world import ISLANDS, World, make_world


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("world"))


def _auditor(world: World, relay: MemoryRelay, clock: BeaconClock | None = None) -> Auditor:
    service = clock or BeaconClock(10**6)  # far past every deadline: missing = withheld
    return Auditor(service, relay, ISLANDS[2], world.manifest, world.dataset_dir, upload_poll_s=0)  # type: ignore[arg-type]


def test_judge_matches_and_withheld_blobs_are_unverifiable(world: World, tmp_path: Path) -> None:
    relay, detail, index = published_round(world, tmp_path)
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
    relay, detail, _ = published_round(world, tmp_path)
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
    relay, detail, index = published_round(world, tmp_path)
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
    relay, detail, index = published_round(world, tmp_path)
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
    relay, detail, index = published_round(world, tmp_path)
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
    published, detail, index = published_round(world, tmp_path)
    deadline = upload_deadline(5, world.manifest.round.audit_window_rounds)
    assignment = AuditAssignment(
        round=0, hotkey=ISLANDS[0].ss58_address, segments=[1], selection_beacon_round=5
    )
    for arrived, result in ((deadline + 3, "unverifiable"), (deadline, "match")):
        clock = BeaconClock(deadline + 5)  # this auditor looks after the deadline
        relay = ArrivalRelay(clock)
        relay.blobs = dict(published.blobs)
        relay.arrived[index.blobs[1]] = arrived
        outcome = _auditor(world, relay, clock).judge(detail, assignment)
        assert outcome.result == result, outcome.detail
        if result == "unverifiable":
            assert "after the upload deadline" in outcome.detail


class _Posting(BeaconClock):
    """The service as far as a verdict goes: records whether the relay held ``sha256``
    when the verdict was posted."""

    def __init__(self, relay: MemoryRelay, sha256: str) -> None:
        super().__init__(10**6)
        self.relay, self.sha256, self.held_at_post = relay, sha256, None

    def verdict(self, envelope: object) -> None:
        self.held_at_post = self.sha256 in self.relay.blobs


def _carry(world: World) -> World:
    inner = world.manifest.inner.model_copy(update={"state_policy": "carry"})
    return replace(world, manifest=world.manifest.model_copy(update={"inner": inner}))


def test_a_match_under_carry_stores_the_carried_state_before_its_verdict(
    world: World, tmp_path: Path
) -> None:
    """The island never uploads its carried state; the auditor that matched the round
    stores it, at the address the island's index names, before it posts the verdict that
    lets the next round's audit fetch it from the relay (``RoundOpen.carry_stored``)."""
    carry = _carry(world)
    relay, detail, index = published_round(carry, tmp_path)
    assert index.carried is not None
    carried = relay.blobs.pop(index.carried)
    service = _Posting(relay, index.carried)
    auditor = Auditor(
        service, relay, ISLANDS[2], carry.manifest, carry.dataset_dir, upload_poll_s=0
    )  # type: ignore[arg-type]
    assignment = AuditAssignment(
        round=0, hotkey=ISLANDS[0].ss58_address, segments=[0, 1], selection_beacon_round=1
    )
    outcome = judge_and_post(auditor, detail, assignment, lambda *_, **__: None)
    assert outcome.result == "match" and service.held_at_post is True
    assert relay.blobs[index.carried] == carried
    assert index.blobs[-1] in relay.blobs  # this helper published every checkpoint
    # under reset nothing later needs it: the index names none, nothing is stored
    relay, detail, index = published_round(world, tmp_path / "reset")
    assert index.carried is None
    del relay.blobs[index.blobs[-1]]
    plain = Auditor(
        _Posting(relay, index.blobs[-1]),
        relay,
        ISLANDS[2],
        world.manifest,
        world.dataset_dir,
        upload_poll_s=0,
    )  # type: ignore[arg-type]
    assert judge_and_post(plain, detail, assignment, lambda *_, **__: None).result == "match"
    assert index.blobs[-1] not in relay.blobs


def test_an_index_naming_another_carried_state_is_a_mismatch_under_carry(
    world: World, tmp_path: Path
) -> None:
    """Later rounds' audits fetch the carried state by the address the index names, so
    under ``carry`` the final segment's check compares it with the replayed final state's
    carried state (a lie there would otherwise hide the carried state from every later
    audit, or start the next round from moments no replay produced)."""
    carry = _carry(world)
    relay, detail, index = published_round(carry, tmp_path)
    auditor = Auditor(
        BeaconClock(10**6), relay, ISLANDS[2], carry.manifest, carry.dataset_dir, upload_poll_s=0
    )  # type: ignore[arg-type]
    assignment = AuditAssignment(
        round=0, hotkey=ISLANDS[0].ss58_address, segments=[0, 1], selection_beacon_round=1
    )
    island = auditor.island_round(detail, assignment)
    assert audit_island(island, [0, 1], relay.blobs.__getitem__).result == "match"
    for named in ("ab" * 32, None, index.blobs[-1]):  # another, none, the full final state
        lie = CheckpointIndex(0, index.leaves, index.blobs, named)
        outcome = audit_island(replace(island, index=lie), [0, 1], relay.blobs.__getitem__)
        assert (outcome.result, outcome.check) == ("mismatch", "update")
        assert "carried state address" in outcome.detail
        assert outcome.carried is None  # nothing to store
