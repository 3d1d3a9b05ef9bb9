"""Overlapped rounds: an island's start is public, and the auditor holds it to it.

With ``round.overlap`` an island that committed round ``r - 1`` starts round ``r`` from
round ``r - 1``'s start model minus ``1 / M`` of its own committed update (``M`` that
round's roster), whatever model round ``r`` opened on; under ``carry`` with its optimizer
state carried. The derivation is bit-exact (two correctly rounded float32 operations),
the miner and the auditor derive the same state, and training from any other start is
a mismatch at leaf 0.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from hypertrain.auditor.replay import IslandRound, audit_island
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.start import PreviousRound, derive_start_state
from hypertrain.evidence.verify import verify_round_open
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import RoundOpen
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.start_state import carried_of, carry_state, overlap_params, reset_state
from hypertrain.trainer.update import decode_update
from tests.auditor.islands import MemoryRelay, publish_round
from tests.auditor.world import ISLANDS, World, make_world


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("overlap"))


def _overlapped(world: World, policy: str) -> World:
    doc = world.manifest.model_dump(mode="json")
    doc["round"]["overlap"] = True
    doc["inner"]["state_policy"] = policy
    doc["compression"]["error_feedback"] = False
    return dataclasses.replace(world, manifest=RunManifest.model_validate(doc))


def _opens(world: World) -> list[RoundOpen]:
    roster = [k.ss58_address for k in ISLANDS]
    return [
        verify_round_open(world.round_open(w, roster).model_dump(), world.manifest, w)
        for w in (0, 1)
    ]


@pytest.mark.parametrize("policy", ["reset", "carry"])
def test_overlapped_start_is_the_previous_start_minus_a_share_of_the_own_update(
    world: World, tmp_path: Path, policy: str
) -> None:
    world = _overlapped(world, policy)
    manifest = world.manifest
    relay = MemoryRelay()
    relay.put(world.model_blob)
    opens = _opens(world)
    config = TrainConfig.from_manifest(manifest)
    r0 = publish_round(world, relay, ISLANDS[0], opens[:1], tmp_path / "r0")
    fetch = lambda sha, limit: relay.get(sha, max_bytes=limit)  # noqa: E731
    params = r0.start_params
    previous = PreviousRound(r0.commit, lambda: params, len(ISLANDS))
    merged = {k: v + 1.0 for k, v in params.items()}  # round 1's model: not used
    derived = derive_start_state(manifest, config, 1, merged, previous, fetch)
    again = derive_start_state(manifest, config, 1, params, previous, fetch)
    assert derived.state_hash() == again.state_hash()  # the opened model plays no part
    delta = decode_update(relay.blobs[r0.commit.update_sha256], manifest.compression)
    for name, value in params.items():  # exactly two rounded operations per element
        expected = value - delta[name] / float(len(ISLANDS))
        assert torch.equal(derived.tensors[name], expected), name
    start = overlap_params(
        params, relay.blobs[r0.commit.update_sha256], len(ISLANDS), manifest.compression
    )
    if policy == "carry":
        carried = carried_of(r0.result.final, params, manifest.compression)
        want = carry_state(carried, start, config.state_config())
    else:
        want = reset_state(config.state_config(), start, config.round_start_step(1))
    assert derived.state_hash() == want.state_hash()
    # an island without a round-0 commit starts from round 1's model, as without overlap
    fresh = derive_start_state(manifest, config, 1, merged, PreviousRound(None, dict, 3), fetch)
    reset = reset_state(config.state_config(), merged, config.round_start_step(1))
    assert fresh.state_hash() == reset.state_hash()
    # trained from its overlapped start: a match; from the opened model's start: leaf 0
    honest = publish_round(world, relay, ISLANDS[0], opens, tmp_path / "h", start=derived)
    stale = carry_state(
        carried_of(r0.result.final, params, manifest.compression), params, config.state_config()
    )
    if policy == "reset":
        stale = reset_state(config.state_config(), params, config.round_start_step(1))
    other = publish_round(world, relay, ISLANDS[0], opens, tmp_path / "s", start=stale)
    for pub, result in ((honest, "match"), (other, "mismatch")):
        island = IslandRound(manifest, pub.commit, pub.index, [], derived.params(), None, derived)
        outcome = audit_island(island, [], relay.blobs.__getitem__)
        assert outcome.result == result, outcome.detail
        assert result == "match" or outcome.first_bad_leaf == 0


def test_an_update_that_is_not_the_committed_one_is_refused(world: World, tmp_path: Path) -> None:
    world = _overlapped(world, "reset")
    relay = MemoryRelay()
    relay.put(world.model_blob)
    r0 = publish_round(world, relay, ISLANDS[0], _opens(world)[:1], tmp_path / "r0")
    config = TrainConfig.from_manifest(world.manifest)
    previous = PreviousRound(r0.commit, lambda: r0.start_params, len(ISLANDS))
    with pytest.raises(VerificationError, match="not the committed one"):
        derive_start_state(world.manifest, config, 1, r0.start_params, previous,
                           lambda sha, limit: b"\x00" * 16)  # fmt: skip
    garbage = b"not an update"
    relay.blobs[r0.commit.update_sha256] = garbage  # a relay serving other bytes
    with pytest.raises(VerificationError):
        derive_start_state(world.manifest, config, 1, r0.start_params, previous,
                           lambda sha, limit: relay.blobs[sha])  # fmt: skip


def test_overlap_refuses_error_feedback(world: World) -> None:
    doc = world.manifest.model_dump(mode="json")
    doc["round"]["overlap"] = True
    doc["compression"]["error_feedback"] = True
    with pytest.raises(ValueError, match="error_feedback is not supported"):
        RunManifest.model_validate(doc)
    doc["round"]["overlap"] = False
    assert "overlap" not in RunManifest.model_validate(doc).model_dump(mode="json")["round"]
