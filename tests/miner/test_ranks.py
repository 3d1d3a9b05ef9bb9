"""A two-rank torchrun island trains the round to the emulation's bytes; a rank that dies
fails the round, and running it again resumes from the last checkpoint to the same bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from hypertrain.auditor.replay import IslandRound, audit_island
from hypertrain.evidence.index import CheckpointIndex
from hypertrain.evidence.inputs import island_layout, load_samples, round_sample_ids
from hypertrain.miner.config import MinerConfig
from hypertrain.miner.errors import ConfigError
from hypertrain.miner.island import checkpoint_path, train_round
from hypertrain.miner.ranks import (
    IslandJob,
    RankError,
    launch_ranks,
    torchrun_command,
    train_ranks,
)
from hypertrain.protocol.manifest import DataSpec, LayoutSpec, RoundSpec, RunManifest
from hypertrain.protocol.messages import Commit, RoundOpen
from hypertrain.trainer.blob import encode_model_blob
from hypertrain.trainer.determinism import configure_determinism
from hypertrain.trainer.model import init_params
from hypertrain.trainer.presets import PRESETS
from hypertrain.trainer.segment import TrainConfig, replay_segment, run_round
from hypertrain.trainer.state import init_state
from hypertrain.trainer.update import build_update, next_round_state
from tests.auditor.world import ISLANDS, make_dataset, manifest_doc
from tests.trainer.conftest import SEQ_LEN, make_config, make_samples


def _manifest() -> RunManifest:
    cfg = make_config(layout=(2, 1, 2))
    return RunManifest(
        run_id="ranks-test",
        seed=3,
        model=PRESETS["tiny"],
        inner=cfg.inner,
        round=RoundSpec(inner_steps=6, checkpoint_interval=2, layout=cfg.layout),
        data=DataSpec(
            dataset_root="0" * 64,
            descriptor_sha256="1" * 64,
            tokenizer_sha256="2" * 64,
            sample_count=1000,
            seq_len=SEQ_LEN,
        ),
        determinism=configure_determinism(1),
    )


def test_torchrun_command_is_local_unless_given_a_rendezvous() -> None:
    assert "--standalone" in torchrun_command(Path("job.json"), 2)
    multi = torchrun_command(Path("j"), 4, ["--nnodes=2", "--rdzv-endpoint=h:29400"], "cuda")
    assert "--standalone" not in multi
    assert "--device=cuda" in multi


@pytest.mark.slow
def test_two_ranks_match_the_emulation_and_resume_after_a_failure(tmp_path: Path) -> None:
    manifest = _manifest()
    config = TrainConfig.from_manifest(manifest)
    start = init_state(config.state_config(), manifest.seed)
    samples = make_samples(6 * config.samples_per_step)
    reference = run_round(start, config, samples)
    workdir = tmp_path / "round-0"
    job = IslandJob(manifest=manifest, layout=config.layout, workdir=str(workdir), zero1=True)
    # Rank 0 cannot write the second checkpoint: it dies after the first segment.
    workdir.mkdir()
    blocker = checkpoint_path(workdir, 2).with_suffix(".bin.tmp")
    blocker.mkdir()
    with pytest.raises(RankError, match="resume"):
        train_ranks(job, start, samples, 2)
    assert checkpoint_path(workdir, 1).exists()
    assert not checkpoint_path(workdir, 2).exists()
    blocker.rmdir()
    train_ranks(job, start, samples, 2)
    result = train_round(start, config, samples, workdir)
    assert result.resumed_from == 3  # the ranks trained everything
    assert result.leaves == reference.leaves
    assert result.root == reference.root
    assert result.final.state_hash() == reference.final.state_hash()
    # The auditor replays each segment in one process from the island's checkpoints.
    local, per_segment = configure_determinism(1), 2 * config.samples_per_step
    for k in range(3):
        end = replay_segment(
            manifest,
            result.checkpoint_paths[k].read_bytes(),
            result.leaves[k],
            samples[k * per_segment : (k + 1) * per_segment],
            local=local,
            layout=config.layout,
            segment=k,
        )
        assert end == result.leaves[k + 1]


def test_a_layout_the_processes_cannot_split_is_refused(tmp_path: Path) -> None:
    manifest = _manifest()
    config = TrainConfig.from_manifest(manifest)
    start = init_state(config.state_config(), manifest.seed)
    with pytest.raises(ConfigError, match="cannot split"):
        launch_ranks(MinerConfig(ranks=3), manifest, config, start, [], tmp_path)
    launch_ranks(MinerConfig(ranks=1), manifest, config, start, [], tmp_path)  # in-process
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_a_two_rank_island_round_is_audited_as_a_match(assets_dir: Path, tmp_path: Path) -> None:
    """The auditor's verdict code, on the round-open layout of a two-rank island."""
    dataset = make_dataset(assets_dir, tmp_path / "dataset")
    doc = manifest_doc(dataset, layout_limits={"max_dp_ranks": 2, "max_micro_batches": 1})
    manifest = RunManifest.model_validate(doc)
    hotkey = ISLANDS[0].ss58_address
    params = init_params(manifest.model, manifest.seed)
    blob = encode_model_blob(params, manifest.model)
    record = RoundOpen(
        round=0,
        start_model_sha256=hashlib.sha256(blob).hexdigest(),
        start_model_url="u",
        beacon_round=100,
        assignment_key="02" * 32,
        roster=[hotkey],
        commit_deadline_round=200,
        layouts={hotkey: LayoutSpec(dp_ranks=2, micro_batch_size=2)},
    )
    layout = island_layout(manifest, record, hotkey)
    config = TrainConfig.from_manifest(manifest, layout=layout)
    samples = load_samples(dataset, round_sample_ids(manifest, dataset, [record], hotkey))
    start = next_round_state(init_state(config.state_config(), manifest.seed), params, None)
    workdir = tmp_path / "round-0"
    cfg = MinerConfig(zero1=1)
    launch_ranks(cfg, manifest, config, start, samples, workdir)
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
    outcome = audit_island(island, range(manifest.round.num_segments), store.__getitem__)
    assert outcome.result == "match" and outcome.update_checked
