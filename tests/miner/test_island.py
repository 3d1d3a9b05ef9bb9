"""Resumable island training: a crash mid-round restarts from the last checkpoint, same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hypertrain.evidence.inputs import load_samples, round_sample_ids
from hypertrain.evidence.verify import verify_round_open
from hypertrain.miner.island import StepEvent, checkpoint_path, earlier_work, train_round
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.segment import Sample, TrainConfig, run_round
from hypertrain.trainer.state import TrainState, init_state
from hypertrain.trainer.update import next_round_state
from tests.auditor.world import ISLANDS, World, make_world


class CrashError(Exception):
    pass


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("world"))


def _inputs(world: World) -> tuple[TrainState, TrainConfig, list[Sample]]:
    config = TrainConfig.from_manifest(world.manifest)
    opens = [
        verify_round_open(
            world.round_open(0, [ISLANDS[0].ss58_address]).model_dump(), world.manifest, 0
        )
    ]
    ids = round_sample_ids(world.manifest, world.dataset, opens, ISLANDS[0].ss58_address)
    params = decode_model_blob(world.model_blob, world.manifest.model)
    start = next_round_state(init_state(config.state_config(), world.manifest.seed), params, None)
    return start, config, load_samples(world.dataset, ids)


def test_killed_mid_round_resumes_with_identical_results(world: World, tmp_path: Path) -> None:
    start, config, samples = _inputs(world)
    reference = run_round(start, config, samples)
    events: list[StepEvent] = []

    def crash_at_3(ev: StepEvent) -> None:
        events.append(ev)
        if ev.step == 3:
            raise CrashError

    with pytest.raises(CrashError):
        train_round(start, config, samples, tmp_path, on_step=crash_at_3)
    assert checkpoint_path(tmp_path, 1).exists() and not checkpoint_path(tmp_path, 2).exists()
    assert (
        earlier_work(tmp_path, start, config) == config.checkpoint_interval
    )  # what a restart says
    assert earlier_work(tmp_path / "none", start, config) is None
    resumed = train_round(start, config, samples, tmp_path, on_step=events.append)
    assert resumed.resumed_from == 1
    assert [e.step for e in events] == [1, 2, 3, 3, 4]
    assert resumed.leaves == reference.leaves and resumed.root == reference.root
    assert all(torch.equal(resumed.final.tensors[k], v) for k, v in reference.final.tensors.items())
    assert resumed.losses == pytest.approx(reference.losses, abs=0)
    again = train_round(start, config, samples, tmp_path)
    assert again.resumed_from == 2 and again.root == reference.root


def test_damaged_checkpoint_is_retrained_and_other_start_wipes(
    world: World, tmp_path: Path
) -> None:
    start, config, samples = _inputs(world)
    first = train_round(start, config, samples, tmp_path)
    checkpoint_path(tmp_path, 2).write_bytes(b"junk" * 10)
    redo = train_round(start, config, samples, tmp_path)
    assert redo.resumed_from == 1 and redo.root == first.root
    other = TrainState(
        start.step, {k: v + 0 for k, v in start.tensors.items()}, start.config_digest
    )
    other.tensors[next(iter(other.tensors))].add_(1.0)
    fresh = train_round(other, config, samples, tmp_path)
    assert fresh.resumed_from == 0 and fresh.root != first.root
