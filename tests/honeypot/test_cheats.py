"""The honeypot's cheats and schedule, as round hooks of the real miner code paths.

Each cheat goes in through :func:`hypertrain.honeypot.cheats.hooks_for`, exactly as
``python -m hypertrain.honeypot.island --strategy S --honest-rounds K`` hands it to the
miner, and is checked against the honest result of the same call: identical bytes
before round K, different bytes from round K on.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hypertrain.evidence.inputs import load_samples, round_sample_ids
from hypertrain.evidence.verify import verify_round_open
from hypertrain.honeypot import cheats
from hypertrain.honeypot.cheats import Schedule, hooks_for
from hypertrain.miner import island
from hypertrain.miner import run as miner_run
from hypertrain.miner.config import MinerConfig
from hypertrain.miner.errors import ConfigError
from hypertrain.miner.hooks import HONEST
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.state import TrainState, init_state
from hypertrain.trainer.update import build_update, next_round_state
from tests.auditor.world import ISLANDS, World, make_world


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("world"))


def _inputs(world: World) -> tuple[TrainState, TrainConfig, list[int], dict[str, torch.Tensor]]:
    config = TrainConfig.from_manifest(world.manifest)
    hotkey = ISLANDS[0].ss58_address
    opens = [verify_round_open(world.round_open(0, [hotkey]).model_dump(), world.manifest, 0)]
    ids = round_sample_ids(world.manifest, world.dataset, opens, hotkey)
    params = decode_model_blob(world.model_blob, world.manifest.model)
    start = next_round_state(init_state(config.state_config(), world.manifest.seed), params, None)
    return start, config, ids, params


def test_schedule_is_honest_before_round_k_and_cheats_from_it() -> None:
    schedule = Schedule("skip-steps", honest_rounds=2)
    assert [schedule.cheats(r) for r in range(5)] == [False, False, True, True, True]
    assert Schedule("bad-update").cheats(0) is True  # K = 0: cheats from the first round
    with pytest.raises(ValueError, match="honest rounds"):
        Schedule("skip-steps", honest_rounds=-1)
    with pytest.raises(ValueError, match="unknown honeypot strategy 'lazy'"):
        cheats.check_strategy("lazy")
    assert [cheats.check_strategy(s) for s in cheats.STRATEGIES] == list(cheats.STRATEGIES)


def test_pure_cheats() -> None:
    assert cheats.wrong_ids([0, 5, 9], 10) == [1, 6, 0]
    assert [cheats.skipped(s, 4) for s in range(8)] == [False, False, False, True] * 2
    skewed = cheats.tamper_start({"w": torch.ones(2)})
    assert torch.equal(skewed["w"], torch.full((2,), cheats.START_SKEW))


def test_honest_rounds_get_the_miners_own_functions() -> None:
    hooks = hooks_for(Schedule("wrong-samples", honest_rounds=1))
    before, after = hooks(0), hooks(1)
    assert (before.samples, before.step, before.update, before.ops) == (
        HONEST.samples,
        HONEST.step,
        HONEST.update,
        HONEST.ops,
    )
    assert after.samples is not HONEST.samples and after.update is HONEST.update
    assert before.details == {"strategy": "wrong-samples", "cheats": False}
    assert after.event == "honeypot" and after.details["cheats"] is True
    assert HONEST.event is None and not HONEST.in_process_only


def test_skip_steps_changes_the_leaves_only_from_round_k(world: World, tmp_path: Path) -> None:
    start, config, ids, _ = _inputs(world)
    samples = load_samples(world.dataset, ids)
    later = dataclasses.replace(config, round_index=1)
    hooks = hooks_for(Schedule("skip-steps", honest_rounds=1))
    honest = [
        island.train_round(start, c, samples, tmp_path / f"honest-{c.round_index}")
        for c in (config, later)
    ]
    pot = [
        island.train_round(
            start, c, samples, tmp_path / f"pot-{c.round_index}", step=hooks(c.round_index).step
        )
        for c in (config, later)
    ]
    assert pot[0].leaves == honest[0].leaves  # round 0 < K: honest, same bytes
    assert pot[1].leaves[0] == honest[1].leaves[0]  # same start ...
    assert pot[1].leaves[1] != honest[1].leaves[1]  # ... the first segment already differs
    assert len(pot[1].losses) == len(honest[1].losses)  # every step still reports


def test_wrong_samples_and_bad_update_follow_the_round(world: World) -> None:
    start, _, ids, params = _inputs(world)
    compression = world.manifest.compression
    honest_samples = [i for i, _ in load_samples(world.dataset, ids)]
    honest_update = build_update(params, start, compression).data
    wrong = hooks_for(Schedule("wrong-samples", honest_rounds=1))
    assert [i for i, _ in wrong(0).samples(world.dataset, ids)] == honest_samples
    cheated = [i for i, _ in wrong(1).samples(world.dataset, ids)]
    assert cheated == cheats.wrong_ids(ids, world.dataset.sample_count) != honest_samples
    assert wrong(1).update(params, start, compression).data == honest_update
    bad = hooks_for(Schedule("bad-update", honest_rounds=1))
    assert bad(0).update(params, start, compression).data == honest_update
    assert bad(1).update(params, start, compression).data != honest_update
    assert [i for i, _ in bad(1).samples(world.dataset, ids)] == honest_samples


def test_a_honeypot_island_trains_in_one_process(world: World) -> None:
    config = TrainConfig.from_manifest(world.manifest)
    hooks = hooks_for(Schedule("wrong-samples", honest_rounds=3))(0)  # even honest rounds
    with pytest.raises(ConfigError, match="one process"):
        miner_run.check_hooks(MinerConfig(ranks=2), config, hooks)
    miner_run.check_hooks(MinerConfig(ranks=1), config, hooks)
    miner_run.check_hooks(MinerConfig(ranks=2), config, HONEST)


def _island(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "hypertrain.honeypot.island", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_island_entry_point_wraps_the_miner_and_refuses_bad_modes() -> None:
    done = _island("--strategy", "skip-steps", "--honest-rounds", "1", "--", "run", "--help")
    assert done.returncode == 0, done.stderr
    assert "--follow" in done.stdout  # the miner's own run help, through the wrapper
    for bad, message in [
        (["--strategy", "skip-steps", "--perturb", "1:0:0"], "not allowed with"),
        (["--strategy", "lazy"], "invalid choice"),
        (["--strategy", "skip-steps", "--honest-rounds", "-1"], "must be >= 0"),
        ([], "one of the arguments --strategy --perturb is required"),
    ]:
        done = _island(*bad, "--", "run", "--help")
        assert done.returncode == 2 and message in done.stderr, done.stderr
