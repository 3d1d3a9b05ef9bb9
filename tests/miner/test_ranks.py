"""A two-rank torchrun island trains the round to the emulation's bytes; a rank that dies
fails the round, and running it again resumes from the last checkpoint to the same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

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
from hypertrain.protocol.manifest import DataSpec, RoundSpec, RunManifest
from hypertrain.trainer.determinism import configure_determinism
from hypertrain.trainer.presets import PRESETS
from hypertrain.trainer.segment import TrainConfig, replay_segment, run_round
from hypertrain.trainer.state import init_state
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
