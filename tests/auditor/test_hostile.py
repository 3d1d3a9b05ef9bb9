"""Hostile island-authored values yield an ``unverifiable`` verdict, never a crash.

Each case re-commits a real island's round with one value of its own bytes made
hostile (so every hash and proof still verifies): the step counter a checkpoint
carries, and tensor values the replay cannot digest. The auditor must answer with a
verdict and its reason, and the decoders of the other island-authored formats (the
dispute's operation inputs) refuse hostile shapes, dtypes, lengths and counts with
their typed error.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest
import torch

from hypertrain.auditor.replay import IslandRound, audit_island
from hypertrain.dispute import opinputs
from hypertrain.dispute.errors import InputMismatchError
from hypertrain.evidence.index import CheckpointIndex
from hypertrain.protocol.merkle import MerkleTree
from hypertrain.trainer.checkpoint import decode_checkpoint, encode_checkpoint
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.state import TrainState
from tests.auditor.islands import island_round
from tests.auditor.world import World, make_world


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("world"))


def _recommitted(island: IslandRound, store: dict[str, bytes], k: int, state: TrainState):  # type: ignore[no-untyped-def]
    """Replace checkpoint ``k`` with ``state`` and commit a root over the new leaves."""
    data = encode_checkpoint(state)
    leaves = [bytes.fromhex(x) for x in island.index.leaves]
    leaves[k] = data[-32:]
    sha = hashlib.sha256(data).hexdigest()
    blobs = list(island.index.blobs)
    blobs[k] = sha
    index = CheckpointIndex(island.index.round, tuple(x.hex() for x in leaves), tuple(blobs))
    commit = island.commit.model_copy(
        update={"checkpoint_root": MerkleTree.from_leaves(leaves).root_hex}
    )
    forged = IslandRound(island.manifest, commit, index, island.samples, island.start_params)
    return forged, {**store, sha: data}


@pytest.mark.parametrize("step", [2**64 - 1, 2**63, 999, 0])
def test_a_checkpoint_carrying_another_step_is_unverifiable(
    world: World, tmp_path: Path, step: int
) -> None:
    island, store = island_round(world, tmp_path, None)
    config = TrainConfig.from_manifest(island.manifest).state_config()
    honest = decode_checkpoint(store[island.index.blobs[1]], config)
    forged, blobs = _recommitted(
        island, store, 1, TrainState(step, honest.tensors, honest.config_digest)
    )
    outcome = audit_island(forged, [1], blobs.__getitem__)
    assert outcome.result == "unverifiable", outcome
    assert outcome.first_bad_leaf == 1 and "carries step" in outcome.detail


def test_a_checkpoint_the_replay_cannot_digest_is_unverifiable(
    world: World, tmp_path: Path
) -> None:
    """Whatever raises inside the replay of island-authored state is the island's."""
    island, store = island_round(world, tmp_path, None)
    config = TrainConfig.from_manifest(island.manifest).state_config()
    honest = decode_checkpoint(store[island.index.blobs[1]], config)
    poisoned = dict(honest.tensors)
    name = next(n for n in poisoned if n.startswith("optim.exp_avg_sq."))
    poisoned[name] = torch.full_like(poisoned[name], float("nan"))
    forged, blobs = _recommitted(
        island, store, 1, TrainState(honest.step, poisoned, honest.config_digest)
    )
    outcome = audit_island(forged, [1], blobs.__getitem__)
    assert outcome.result in ("unverifiable", "mismatch"), outcome  # a verdict, never a raise
    assert outcome.first_bad_leaf in (1, 2)


def _tensor(dtype: bytes, shape: list[int], nbytes: int, data: bytes = b"") -> bytes:
    head = struct.pack("<H", len(dtype)) + dtype + struct.pack("<B", len(shape))
    return head + b"".join(struct.pack("<Q", d) for d in shape) + struct.pack("<Q", nbytes) + data


@pytest.mark.parametrize(
    "body",
    [
        struct.pack("<I", 2**32 - 1),  # a count far over the limit
        struct.pack("<I", 1) + _tensor(b"torch.float99", [2], 8, bytes(8)),  # unknown dtype
        struct.pack("<I", 1) + _tensor(b"\xff\xfe", [2], 8, bytes(8)),  # not UTF-8
        struct.pack("<I", 1) + _tensor(b"torch.float32", [2**63, 2**63], 0),  # overflow shape
        struct.pack("<I", 1) + _tensor(b"torch.float32", [2] * 255, 0),  # deep nesting
        struct.pack("<I", 1) + _tensor(b"torch.float32", [3], 2**64 - 1),  # length
        struct.pack("<I", 1) + _tensor(b"torch.float32", [3], 12, bytes(4)),  # truncated
        struct.pack("<I", 2) + _tensor(b"torch.int8", [1], 1, b"\x00"),  # missing tensor
    ],
)
def test_operation_inputs_with_hostile_values_are_refused(body: bytes) -> None:
    with pytest.raises(InputMismatchError):
        opinputs.check_inputs(opinputs.MAGIC + body, ["00" * 32])
