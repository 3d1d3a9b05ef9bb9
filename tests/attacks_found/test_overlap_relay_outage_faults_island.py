"""Overlapped rounds: a relay that cannot serve round ``r``'s start model (a network error, a
lost cache) while an auditor derives an island's round-``r + 1`` start.

Round ``r``'s start model is a public input (the coordinator's round-open record names it);
the island controls none of it. Without overlap, a relay failure on the round's own start
model is raised to the auditor's loop (retried, nobody judged). Under ``round.overlap`` the
derived start also needs round ``r``'s start model; the same relay failure there must not
become an ``unverifiable`` verdict against the island (a fault, its escrow burned).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from hypertrain.auditor.runner import Auditor
from hypertrain.evidence.start import PreviousRound, derive_start_state
from hypertrain.evidence.verify import verify_round_open
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import AuditAssignment
from hypertrain.relay.errors import RelayError
from hypertrain.trainer.blob import decode_model_blob, encode_model_blob
from hypertrain.trainer.segment import TrainConfig
from tests.auditor.islands import BeaconClock, MemoryRelay, Records, publish_round
from tests.auditor.world import ISLANDS, World, make_world


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    made = make_world(assets_dir, tmp_path_factory.mktemp("overlap-outage"))
    doc = made.manifest.model_dump(mode="json")
    doc["round"]["overlap"] = True
    doc["inner"]["state_policy"] = "reset"
    doc["compression"]["error_feedback"] = False
    return dataclasses.replace(made, manifest=RunManifest.model_validate(doc))


class Service(BeaconClock):
    """Round details by index and a beacon far past every deadline."""

    def __init__(self, details: dict[int, Records]) -> None:
        super().__init__(10**6)
        self.details = details

    def round_detail(self, run_id: str, index: int) -> Any:
        return self.details[index]


def test_a_relay_outage_on_the_previous_start_model_is_not_the_islands_fault(
    world: World, tmp_path: Path
) -> None:
    manifest = world.manifest
    roster = sorted(k.ss58_address for k in ISLANDS)
    relay = MemoryRelay()
    relay.put(world.model_blob)  # round 0's start model S_0
    params = decode_model_blob(world.model_blob, manifest.model)
    merged_blob = encode_model_blob({k: v * 0.5 for k, v in params.items()}, manifest.model)
    merged_sha = relay.put(merged_blob)  # round 1's opened model G(0), another blob
    envs = [world.round_open(0, roster), world.round_open(1, roster, sha=merged_sha)]
    opens = [verify_round_open(e.model_dump(), manifest, w) for w, e in enumerate(envs)]
    island = ISLANDS[0]
    r0 = publish_round(world, relay, island, opens[:1], tmp_path / "r0")
    config = TrainConfig.from_manifest(manifest)
    fetch = lambda sha, limit: relay.get(sha, max_bytes=limit)  # noqa: E731
    previous = PreviousRound(r0.commit, lambda: r0.start_params, len(roster))
    start = derive_start_state(manifest, config, 1, {}, previous, fetch)
    r1 = publish_round(world, relay, island, opens, tmp_path / "r1", start=start)  # honest
    details = {
        0: Records(
            Envelope.model_validate(envs[0].model_dump()), [Envelope.model_validate(r0.envelope)]
        ),
        1: Records(
            Envelope.model_validate(envs[1].model_dump()), [Envelope.model_validate(r1.envelope)]
        ),
    }
    service = Service(details)
    auditor = Auditor(service, relay, ISLANDS[2], manifest, world.dataset_dir, upload_poll_s=0)  # type: ignore[arg-type]
    assignment = AuditAssignment(
        round=1, hotkey=island.ss58_address, segments=[0], selection_beacon_round=1
    )
    assert auditor.judge(details[1], assignment).result == "match"  # the honest island

    # the relay fails on round 1's own opened model: raised, not judged (as without overlap)
    relay.unreachable = {merged_sha}
    with pytest.raises(RelayError):
        auditor.judge(details[1], assignment)

    # the same failure on round 0's start model (needed only for the overlapped start)
    relay.unreachable = {world.model_sha}
    fresh = Auditor(service, relay, ISLANDS[2], manifest, world.dataset_dir, upload_poll_s=0)  # type: ignore[arg-type]
    try:
        outcome = fresh.judge(details[1], assignment)
    except RelayError:
        return  # the public input's outage is the relay's, retried later
    pytest.fail(f"an honest island judged {outcome.result!r} for a relay outage: {outcome.detail}")
