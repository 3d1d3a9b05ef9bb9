"""Replay audits on real text: an honest island matches, every honeypot is caught by bytes.

What the island cannot prove (a failing inclusion proof, checkpoint bytes that are not
the leaf) is ``unverifiable``; what it proves wrong is a ``mismatch``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hypertrain.auditor.replay import IslandRound, audit_island
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.index import CheckpointIndex
from hypertrain.evidence.verify import verify_manifest, verify_round_open
from hypertrain.protocol.manifest import CompressionSpec, SparseSpec
from hypertrain.trainer.checkpoint import decode_checkpoint
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.sparse_codec import is_sparse
from hypertrain.trainer.update import build_update
from tests.auditor.islands import island_round
from tests.auditor.world import COORD, ISLANDS, RUN_ID, World, make_world


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("world"))


def test_honest_island_matches_with_update_check(world: World, tmp_path: Path) -> None:
    island, store = island_round(world, tmp_path, None)
    outcome = audit_island(island, [0, 1], store.__getitem__)
    assert outcome.result == "match" and outcome.update_checked and outcome.first_bad_leaf is None


@pytest.mark.parametrize(
    ("strategy", "segments", "leaf"),
    [("wrong-samples", [1], 2), ("skip-steps", [0], 1), ("bad-update", [1], 2)],
)
def test_honeypots_are_caught(
    world: World, tmp_path: Path, strategy: str, segments: list[int], leaf: int
) -> None:
    island, store = island_round(world, tmp_path, strategy)
    outcome = audit_island(island, segments, store.__getitem__)
    assert outcome.result == "mismatch" and outcome.first_bad_leaf == leaf, outcome.detail
    if strategy == "bad-update":
        assert "update" in outcome.detail
        assert audit_island(island, [0], store.__getitem__).result == "match"


def test_checkpoint_whose_proof_fails_is_refused(world: World, tmp_path: Path) -> None:
    island, store = island_round(world, tmp_path, None)
    forged = list(island.index.leaves)
    forged[1] = "00" * 32
    bad_index = CheckpointIndex(0, tuple(forged), island.index.blobs)
    with pytest.raises(VerificationError, match="proof for leaf 1"):
        bad_index.verified_leaf(1, island.commit.checkpoint_root)
    tampered = IslandRound(
        island.manifest, island.commit, bad_index, island.samples, island.start_params
    )
    outcome = audit_island(tampered, [0], store.__getitem__)
    assert outcome.result == "unverifiable" and "unverifiable leaf" in outcome.detail
    # a checkpoint blob whose bytes are not the committed leaf cannot be proven either
    swapped = {**store, island.index.blobs[1]: store[island.index.blobs[0]]}
    outcome = audit_island(island, [1], swapped.__getitem__)
    assert outcome.result == "unverifiable" and "not the expected" in outcome.detail


def test_manifest_with_bad_signature_is_refused(world: World) -> None:
    env = world.manifest_envelope().model_dump()
    assert verify_manifest(env, RUN_ID, COORD.ss58_address).run_id == RUN_ID
    env["body"]["manifest"]["seed"] = 4
    with pytest.raises(VerificationError, match="signature"):
        verify_manifest(env, RUN_ID, None)
    forged = world.manifest_envelope(ISLANDS[0]).model_dump()
    with pytest.raises(VerificationError, match="signed by"):
        verify_manifest(forged, RUN_ID, COORD.ss58_address)
    with pytest.raises(VerificationError, match="run"):
        verify_manifest(world.manifest_envelope().model_dump(), "other-run", None)


def test_round_record_must_be_from_the_coordinator(world: World) -> None:
    env = world.round_open(0, [ISLANDS[0].ss58_address]).model_dump()
    env["body"]["start_model_sha256"] = "ff" * 32
    with pytest.raises(VerificationError):
        verify_round_open(env, world.manifest, 0)
    with pytest.raises(VerificationError, match="round 0, not 1"):
        verify_round_open(world.round_open(0, []).model_dump(), world.manifest, 1)


def test_sparse_update_is_re_encoded_by_the_auditor(world: World, tmp_path: Path) -> None:
    """With the sparse codec and error feedback, the final-segment check re-encodes exactly."""
    sparse = CompressionSpec(
        error_feedback=True, sparse=SparseSpec(chunk_size=256, topk_per_chunk=8, value_bits=2)
    )
    manifest = world.manifest.model_copy(update={"compression": sparse})
    sparse_world = World(world.dataset, world.dataset_dir, manifest, world.model_blob)
    island, store = island_round(sparse_world, tmp_path, None)
    assert is_sparse(build_update(island.start_params, _final_state(island, store), sparse).data)
    last = manifest.round.num_segments - 1
    outcome = audit_island(island, [last], store.__getitem__)
    assert outcome.result == "match" and outcome.update_checked, outcome.detail
    lying, lying_store = island_round(sparse_world, tmp_path / "bad", "bad-update")
    bad = audit_island(lying, [last], lying_store.__getitem__)
    assert bad.result == "mismatch" and "update" in bad.detail


def _final_state(island: IslandRound, store: dict[str, bytes]):  # type: ignore[no-untyped-def]
    config = TrainConfig.from_manifest(island.manifest)
    k = island.index.blobs[-1]
    return decode_checkpoint(store[k], config.state_config())
