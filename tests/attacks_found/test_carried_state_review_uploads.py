"""An island whose previous round has no commit still uploads that round's carried state.

The miner writes ``carried.bin`` (``write_carried``) right after training, *before* it
uploads its index and posts its commit (``miner.run.run_round``). When the commit is
refused (``late``: the round moved on while it trained, an honest and ordinary event;
docs/miner.md) the file stays in that round's work directory. In the next round the
island has no previous commit, so its start is the ``reset`` state and the audit needs
nothing of it (``derive_start_state``: no commit, the public start; the auditor's
``previous_round`` finds none). Yet when that round is audited, ``watch``/``run`` serve the
selection through ``miner.checkpoints.owed_carried`` -> ``carried_checkpoint``, which asks only
whether the file exists, and ``upload_selected`` sends it: two thirds of a training
state (AdamW) the island pays for in bytes and relay quota for nothing, and that the
byte count (``dashboard.traffic._audits``: carried states only for islands that
committed the round before) never shows.

Safe behaviour asserted: an audited island with no commit in the previous round uploads
no carried state.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hypertrain.evidence.opens import OpenRecords
from hypertrain.evidence.start import PreviousRound, derive_start_state
from hypertrain.miner.checkpoints import CARRIED_FILE, owed_carried, upload_selected
from hypertrain.miner.island import checkpoint_path
from hypertrain.protocol.envelope import Envelope
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.start_state import reset_state
from tests.attacks_found.carried_state_review import ROSTER, policy_world
from tests.auditor.islands import MemoryRelay, publish_round
from tests.auditor.world import ISLANDS, World, make_world
from tests.miner.test_checkpoints import PathRelay

ISLAND = ISLANDS[0]


@pytest.fixture(scope="module")
def made(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("carried-uploads"))


def _ctx(world: World, root: Path, details: dict[int, Any]) -> Any:
    """The slice of ``RunContext`` that ``_carried`` reads."""
    return SimpleNamespace(
        manifest=world.manifest,
        opens=OpenRecords(world.manifest),
        config=SimpleNamespace(round_dir=lambda w: root / f"round-{w}"),
        service=SimpleNamespace(round_detail=lambda run_id, w: details[w]),
    )


def test_an_island_with_no_previous_commit_uploads_no_carried_state(
    made: World, tmp_path: Path
) -> None:
    world = policy_world(made)
    relay = MemoryRelay()
    relay.put(world.model_blob)
    from hypertrain.evidence.verify import verify_round_open

    opens = [verify_round_open(world.round_open(0, ROSTER).model_dump(), world.manifest, 0)]
    # round 0 trained (carried.bin written), but its commit came too late: none recorded
    r0 = publish_round(world, relay, ISLAND, opens, tmp_path / "round-0")
    assert (tmp_path / "round-0" / CARRIED_FILE).exists()
    details = {
        0: SimpleNamespace(round=0, open=Envelope.model_validate(
            world.round_open(0, ROSTER).model_dump()), commits=[]),
        1: SimpleNamespace(round=1, open=Envelope.model_validate(
            world.round_open(1, ROSTER).model_dump()), commits=[]),
    }  # fmt: skip
    # what the audit of round 1 needs: the public reset start, nothing of round 0
    config = TrainConfig.from_manifest(world.manifest, round_index=1)
    start = derive_start_state(
        world.manifest, config, 1, r0.start_params,
        PreviousRound(None, lambda: r0.start_params, len(ROSTER)),
        lambda sha, limit: pytest.fail(f"the start fetched {sha[:16]}"),  # type: ignore[arg-type,return-value]
    )  # fmt: skip
    public = reset_state(config.state_config(), r0.start_params, config.round_start_step(1))
    assert start.state_hash() == public.state_hash()
    # what the island's watch loop uploads for round 1's selection (actions.serve_audits)
    current = tmp_path / "round-1"
    current.mkdir()
    for k in range(3):
        checkpoint_path(current, k).write_bytes(bytes([1, k]) * 8)
    carried = owed_carried(_ctx(world, tmp_path, details), ISLAND.ss58_address, details[1])  # type: ignore[arg-type]
    island_relay = PathRelay()
    sent = upload_selected(island_relay, current, 1, [0, 1], 10**9, carried)  # type: ignore[arg-type]
    extra = [p for p in island_relay.put_paths if p.name == CARRIED_FILE]
    assert extra == [], (
        f"uploaded {sum(p.stat().st_size for p in extra)} bytes of a carried state no audit"
        f" needs (of {sent} sent): round 0 has no commit, round 1 starts from the public state"
    )
