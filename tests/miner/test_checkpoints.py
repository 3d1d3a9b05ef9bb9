"""Checkpoints on demand: the island knows what an audit selected, and only that leaves."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from hypertrain.miner.checkpoints import (
    CARRIED_FILE,
    carried_checkpoint,
    checkpoint_addresses,
    checkpoints_to_upload,
    selected_segments,
    upload_selected,
)
from hypertrain.miner.island import checkpoint_path
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.messages import AuditAssignment, RoundOpen
from tests.auditor.world import COORD, ISLANDS, RUN_ID, World, make_world


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("world"))


def _assignment(signer: object, hotkey: str, segments: list[int]) -> dict[str, object]:
    body = AuditAssignment(round=0, hotkey=hotkey, segments=segments, selection_beacon_round=3)
    return seal(
        signer,  # type: ignore[arg-type]
        domain="audit-assignment",
        run_id=RUN_ID,
        body=body.model_dump(mode="json"),
        expiry_round=10**9,
    ).model_dump()


def _open(world: World, index: int) -> RoundOpen:
    roster = [k.ss58_address for k in ISLANDS]
    return RoundOpen.model_validate(world.round_open(index, roster).body)


def test_only_coordinator_signed_assignments_select(world: World) -> None:
    me, other = ISLANDS[0].ss58_address, ISLANDS[1].ss58_address
    raw = [
        _assignment(COORD, me, [1]),
        _assignment(COORD, other, [0]),
        _assignment(ISLANDS[1], me, [0]),  # not the coordinator: obliges nothing
        _assignment(COORD, me, [1]),
    ]
    assert selected_segments(raw, world.manifest, me) == [1]
    assert selected_segments(raw[1:2], world.manifest, me) is None


def test_index_addresses_are_computed_without_uploading(tmp_path: Path) -> None:
    paths = []
    for k, size in enumerate((0, 10, 3 << 20)):
        path = tmp_path / f"ckpt-{k}"
        path.write_bytes(bytes([k]) * size)
        paths.append(path)
    assert checkpoint_addresses(paths) == tuple(
        hashlib.sha256(p.read_bytes()).hexdigest() for p in paths
    )


def test_segment_zero_is_never_uploaded() -> None:
    # its start state is the public one auditors derive (tests/auditor/test_runner.py)
    assert checkpoints_to_upload([0, 1, 2]) == [1, 2]
    assert checkpoints_to_upload([0]) == []  # J = H: an audit moves no checkpoint at all


class PathRelay:
    """What ``upload_selected`` calls of a relay: ``held_at_origin`` and ``put`` of a path."""

    def __init__(self) -> None:
        self.put_paths: list[Path] = []
        self.held: dict[str, int] = {}

    def held_at_origin(self, sha256: str, size: int) -> bool:
        return self.held.get(sha256) == size

    def put(self, path: Path, **_: object) -> str:
        self.put_paths.append(path)
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        self.held[sha] = len(data)
        return sha


def _round_dir(root: Path, index: int, leaves: int) -> Path:
    workdir = root / f"round-{index}"
    workdir.mkdir(parents=True)
    for k in range(leaves):
        checkpoint_path(workdir, k).write_bytes(bytes([index, k]) * 8)
    (workdir / CARRIED_FILE).write_bytes(bytes([index, 255]) * 8)
    return workdir


@pytest.mark.parametrize("policy", ["reset", "carry"])
def test_an_audit_under_carry_also_uploads_the_previous_carried_state(
    world: World, tmp_path: Path, policy: str
) -> None:
    """Under ``carry`` the auditor derives round r's start state from the state the
    island's round r - 1 carried, so an audited island uploads it (every audit of a carry
    run was ``unverifiable`` while it did not); under ``reset`` nothing more leaves."""
    inner = world.manifest.inner.model_copy(update={"state_policy": policy})
    manifest = world.manifest.model_copy(update={"inner": inner})
    previous, current = _round_dir(tmp_path, 0, 3), _round_dir(tmp_path, 1, 3)
    me = ISLANDS[0].ss58_address
    opens = [_open(world, w) for w in (0, 1)]
    carried = carried_checkpoint(manifest, opens[1], me, previous, committed=True)
    assert carried == (previous / CARRIED_FILE if policy == "carry" else None)
    assert (
        carried_checkpoint(manifest, opens[0], me, previous, committed=True) is None
    )  # the public start
    assert (
        carried_checkpoint(manifest, opens[1], me, tmp_path / "never-trained", committed=True)
        is None
    )
    # an island the round starts fresh (a proven fault before it) carries nothing
    fresh = opens[1].model_copy(update={"fresh_start": [me]})
    assert carried_checkpoint(manifest, fresh, me, previous, committed=True) is None
    # a carried state written for a commit the service refused (late) is owed by nobody:
    # the round starts from the public state (found by an attacker review)
    assert carried_checkpoint(manifest, opens[1], me, previous, committed=False) is None
    relay = PathRelay()
    sent = upload_selected(relay, current, 1, [0, 2], 10**9, carried)  # type: ignore[arg-type]
    want = [checkpoint_path(current, 2), *([carried] if carried is not None else [])]
    assert relay.put_paths == want and sent == sum(p.stat().st_size for p in want)


def test_a_checkpoint_the_relay_holds_is_not_uploaded_again(world: World, tmp_path: Path) -> None:
    """An auditor that matched the island's previous round stored that carried state (the
    record's ``carry_stored``): the island's carried upload is then skipped, and made
    only when the relay does not hold it (a store that failed)."""
    inner = world.manifest.inner.model_copy(update={"state_policy": "carry"})
    manifest = world.manifest.model_copy(update={"inner": inner})
    previous, current = _round_dir(tmp_path, 0, 3), _round_dir(tmp_path, 1, 3)
    me = ISLANDS[0].ss58_address
    listed = _open(world, 1).model_copy(update={"carry_stored": [me]})
    carried = carried_checkpoint(manifest, listed, me, previous, committed=True)
    assert carried == previous / CARRIED_FILE  # the island still holds the duty
    relay = PathRelay()
    stored = carried.read_bytes()
    relay.held[hashlib.sha256(stored).hexdigest()] = len(stored)  # the auditor's store
    assert upload_selected(relay, current, 1, [0], 10**9, carried) == 0  # type: ignore[arg-type]
    assert relay.put_paths == []
    relay.held.clear()  # the store failed: the island uploads it
    sent = upload_selected(relay, current, 1, [0], 10**9, carried)  # type: ignore[arg-type]
    assert relay.put_paths == [carried] and sent == len(stored)
