"""Round 0's model: the seed's, or a warm start's given as a file, never a swap."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.errors import GenesisError
from hypertrain.aggregator.runner import genesis
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.genesis import genesis_blob
from hypertrain.protocol.manifest import RunManifest, WarmStartSpec
from hypertrain.trainer.blob import encode_model_blob
from hypertrain.trainer.model import init_params
from tests.auditor.world import make_world


def _warm(manifest: RunManifest) -> RunManifest:
    spec = WarmStartSpec(steps=3, samples_per_step=4)
    return manifest.model_copy(update={"warm_start": spec})


def test_a_run_without_a_warm_start_starts_from_its_seed(assets_dir: Path, tmp_path: Path) -> None:
    world = make_world(assets_dir, tmp_path)
    store = MemoryBlobs()
    sha, _ = genesis(world.manifest, store)
    assert store.data[sha] == world.model_blob
    other = encode_model_blob(init_params(world.manifest.model, 99), world.manifest.model)
    with pytest.raises(GenesisError, match="no warm start"):
        genesis(world.manifest, store, lambda m: other)


def test_a_warm_start_needs_its_model_and_publishes_the_one_computed(
    assets_dir: Path, tmp_path: Path
) -> None:
    world = make_world(assets_dir, tmp_path)
    manifest, store = _warm(world.manifest), MemoryBlobs()
    with pytest.raises(GenesisError, match="3-step warm start"):
        genesis(manifest, store)
    with pytest.raises(VerificationError, match="needs the run's dataset"):
        genesis_blob(manifest)
    blob = genesis_blob(manifest, world.dataset)
    assert blob != world.model_blob  # three steps moved it off the seed's model
    assert genesis_blob(manifest, world.dataset) == blob  # a replay computes the same bytes
    sha, _ = genesis(manifest, store, lambda m: blob)
    assert sha == hashlib.sha256(blob).hexdigest()
    with pytest.raises(GenesisError, match="does not fit"):
        genesis(manifest, store, lambda m: b"not a model")
