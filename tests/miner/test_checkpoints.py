"""Checkpoints on demand: the island knows what an audit selected, and only that leaves."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from hypertrain.miner.checkpoints import (
    checkpoint_addresses,
    checkpoints_to_upload,
    selected_segments,
)
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.messages import AuditAssignment
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
