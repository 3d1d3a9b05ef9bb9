"""An expert-parallel island launched from its admitted layout, audited in one process."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from hypertrain.auditor.replay import IslandRound, audit_island
from hypertrain.data.dataset import Dataset
from hypertrain.evidence.index import CheckpointIndex
from hypertrain.evidence.inputs import island_layout, load_samples, round_sample_ids
from hypertrain.miner.config import MinerConfig
from hypertrain.miner.errors import ConfigError
from hypertrain.miner.island import train_round
from hypertrain.miner.joining import join_layout
from hypertrain.miner.ranks import launch_ranks
from hypertrain.protocol.manifest import LayoutSpec, RunManifest
from hypertrain.protocol.messages import Commit, RoundOpen
from hypertrain.trainer.blob import encode_model_blob
from hypertrain.trainer.model import init_params
from hypertrain.trainer.presets import get_preset, with_vocab
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.state import init_state
from hypertrain.trainer.update import build_update, next_round_state
from tests.auditor.world import ISLANDS, make_dataset, manifest_doc

LIMITS = {"max_dp_ranks": 2, "max_micro_batches": 1, "max_ep": 2}
EP2 = LayoutSpec(dp_ranks=2, micro_batch_size=2, ep=2, zero1=True)


def _moe_manifest(assets_dir: Path, tmp_path: Path, max_ep: int = 2) -> tuple[RunManifest, Dataset]:
    dataset = make_dataset(assets_dir, tmp_path / "dataset")
    doc = manifest_doc(dataset, layout_limits={**LIMITS, "max_ep": max_ep})
    moe = with_vocab(get_preset("tiny-moe"), dataset.descriptor.vocab_size)
    doc["model"] = moe.model_dump(mode="json")
    return RunManifest.model_validate(doc), dataset


def test_the_join_layout_carries_ep_and_zero1(assets_dir: Path, tmp_path: Path) -> None:
    manifest, _ = _moe_manifest(assets_dir, tmp_path)
    layout = join_layout(manifest, MinerConfig(ep=2, zero1=1), devices=2)
    assert (layout.dp_ranks, layout.ep, layout.zero1, layout.expert_groups) == (2, 2, True, 1)
    strict, _ = _moe_manifest(assets_dir, tmp_path / "strict", max_ep=1)
    with pytest.raises(ConfigError, match="ep=2 exceeds the limit of 1"):
        join_layout(strict, MinerConfig(ep=2), devices=2)
    with pytest.raises(ConfigError, match="does not divide a world of 1"):
        join_layout(manifest, MinerConfig(ep=2), devices=1)


def test_a_layout_whose_ep_does_not_divide_the_processes_is_refused(
    assets_dir: Path, tmp_path: Path
) -> None:
    manifest, _ = _moe_manifest(assets_dir, tmp_path)
    config = TrainConfig.from_manifest(manifest, layout=EP2)
    start = init_state(config.state_config(), manifest.seed)
    with pytest.raises(ConfigError, match="ep=2 does not divide the island's 1 processes"):
        launch_ranks(MinerConfig(ranks=1), manifest, config, start, [], tmp_path / "w")
    assert not (tmp_path / "w.island").exists()


@pytest.mark.slow
def test_an_ep2_island_round_is_audited_as_a_match(assets_dir: Path, tmp_path: Path) -> None:
    """Two torchrun ranks, two experts each: the auditor's one-process replay of every
    segment (and of the update) reproduces the island's commitment."""
    manifest, dataset = _moe_manifest(assets_dir, tmp_path)
    hotkey = ISLANDS[0].ss58_address
    params = init_params(manifest.model, manifest.seed)
    blob = encode_model_blob(params, manifest.model)
    record = RoundOpen(
        round=0,
        start_model_sha256=hashlib.sha256(blob).hexdigest(),
        start_model_url="u",
        beacon_round=100,
        assignment_key="03" * 32,
        roster=[hotkey],
        commit_deadline_round=200,
        layouts={hotkey: EP2},
    )
    layout = island_layout(manifest, record, hotkey)
    assert layout.ep == 2
    config = TrainConfig.from_manifest(manifest, layout=layout)
    samples = load_samples(dataset, round_sample_ids(manifest, dataset, [record], hotkey))
    start = next_round_state(init_state(config.state_config(), manifest.seed), params, None)
    workdir = tmp_path / "round-0"
    launch_ranks(MinerConfig(), manifest, config, start, samples, workdir)
    result = train_round(start, config, samples, workdir)
    assert result.resumed_from == manifest.round.num_segments  # trained by the ranks
    update = build_update(params, result.final, manifest.compression)
    store = {
        hashlib.sha256(p.read_bytes()).hexdigest(): p.read_bytes() for p in result.checkpoint_paths
    }
    commit = Commit(
        round=0,
        checkpoint_root=result.root.hex(),
        leaf_count=len(result.leaves),
        update_sha256=hashlib.sha256(update.data).hexdigest(),
        update_bytes=len(update.data),
        tokens=result.tokens,
        update_url="u",
    )
    index = CheckpointIndex(0, tuple(x.hex() for x in result.leaves), tuple(store))
    island = IslandRound(manifest, commit, index, samples, params, layout)
    before = torch.get_num_threads()
    torch.set_num_threads(manifest.determinism.num_threads)  # as the auditor pins it
    try:
        outcome = audit_island(island, range(manifest.round.num_segments), store.__getitem__)
    finally:
        torch.set_num_threads(before)
    assert outcome.result == "match" and outcome.update_checked, outcome
