"""Islands with different layouts: budgets from the signed round-open, replay with the island's."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from hypertrain.auditor.replay import IslandRound, audit_island
from hypertrain.evidence.index import CheckpointIndex
from hypertrain.evidence.inputs import island_layout, load_samples, round_sample_ids
from hypertrain.miner.island import train_round
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.manifest import LayoutSpec, RunManifest
from hypertrain.protocol.messages import Commit, RoundOpen
from hypertrain.trainer.blob import decode_model_blob, encode_model_blob
from hypertrain.trainer.model import init_params
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.state import init_state
from hypertrain.trainer.update import build_update, next_round_state
from tests.auditor.world import COORD, ISLANDS, RUN_ID, World, make_dataset, manifest_doc

BIG = LayoutSpec(micro_batches=2, micro_batch_size=2)


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    tmp = tmp_path_factory.mktemp("layouts")
    dataset = make_dataset(assets_dir, tmp / "dataset")
    doc = manifest_doc(dataset, layout_limits={"max_dp_ranks": 1, "max_micro_batches": 2})
    manifest = RunManifest.model_validate(doc)
    blob = encode_model_blob(init_params(manifest.model, manifest.seed), manifest.model)
    return World(dataset, tmp / "dataset", manifest, blob)


def _open(world: World) -> RoundOpen:
    roster = sorted(k.ss58_address for k in ISLANDS[:2])
    record = RoundOpen(
        round=0,
        start_model_sha256=world.model_sha,
        start_model_url="u",
        beacon_round=100,
        assignment_key="01" * 32,
        roster=roster,
        commit_deadline_round=200,
        layouts={
            ISLANDS[0].ss58_address: BIG,
            ISLANDS[1].ss58_address: world.manifest.round.layout,
        },
    )
    body = record.model_dump(mode="json")
    seal(COORD, domain="round-open", run_id=RUN_ID, body=body, expiry_round=10**9)  # signable
    return record


def test_islands_with_different_layouts_get_disjoint_budgets(world: World) -> None:
    record = _open(world)
    big, small = (
        round_sample_ids(world.manifest, world.dataset, [record], k.ss58_address)
        for k in ISLANDS[:2]
    )
    h = world.manifest.round.inner_steps
    assert (len(big), len(small)) == (h * 4, h * 2)
    assert not set(big) & set(small)
    assert island_layout(world.manifest, record, ISLANDS[0].ss58_address) == BIG


def _trained(world: World, workdir: Path) -> tuple[IslandRound, dict[str, bytes]]:
    manifest, record = world.manifest, _open(world)
    hotkey = ISLANDS[0].ss58_address
    layout = island_layout(manifest, record, hotkey)
    config = TrainConfig.from_manifest(manifest, layout=layout)
    samples = load_samples(
        world.dataset, round_sample_ids(manifest, world.dataset, [record], hotkey)
    )
    params = decode_model_blob(world.model_blob, manifest.model, world.model_sha)
    start = next_round_state(init_state(config.state_config(), manifest.seed), params, None)
    result = train_round(start, config, samples, workdir)
    assert result.tokens == manifest.round.island_samples(layout) * (manifest.data.seq_len - 1)
    update = build_update(params, result.final, manifest.compression)
    store = {
        hashlib.sha256(p.read_bytes()).hexdigest(): p.read_bytes() for p in result.checkpoint_paths
    }
    index = CheckpointIndex(0, tuple(x.hex() for x in result.leaves), tuple(store))
    commit = Commit(
        round=0,
        checkpoint_root=result.root.hex(),
        leaf_count=len(result.leaves),
        update_sha256=hashlib.sha256(update.data).hexdigest(),
        update_bytes=len(update.data),
        tokens=result.tokens,
        update_url="u",
    )
    return IslandRound(manifest, commit, index, samples, params, layout), store


def test_replay_with_the_island_layout_matches_and_with_another_mismatches(
    world: World, tmp_path: Path
) -> None:
    island, store = _trained(world, tmp_path)
    fetch = store.__getitem__
    assert audit_island(island, [0, 1], fetch).result == "match"
    default = dataclasses.replace(island, layout=None)  # the run's default: half the samples
    outcome = audit_island(default, [0], fetch)
    assert outcome.result == "mismatch" and outcome.first_bad_leaf == 1
