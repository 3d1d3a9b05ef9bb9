"""Real gloo islands of 1, 2 and 4 processes give the emulation's leaves, root and update."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from hypertrain.trainer.distributed import (
    Island,
    IslandError,
    RankGroup,
    init_island,
    local_ranks,
)
from hypertrain.trainer.expert_parallel import (
    ExpertLayoutError,
    ExpertPlacement,
    expert_param_names,
)
from hypertrain.trainer.model import param_shapes
from hypertrain.trainer.presets import PRESETS
from hypertrain.trainer.reduction import shard_owners
from hypertrain.trainer.segment import run_round
from hypertrain.trainer.state import init_state
from tests.trainer.conftest import make_config
from tests.trainer.island_case import CASES, case_inputs, ep_cases, summary

ROOT = Path(__file__).resolve().parents[2]


def _launch(world: int, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "result.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    args = [str(tmp_path / "store"), "", str(world), str(out)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.trainer.island_case", *args[:1], str(r), *args[2:]],
            cwd=ROOT,
            env=env,
        )
        for r in range(world)
    ]
    codes = [p.wait(timeout=300) for p in procs]
    assert codes == [0] * world
    return dict(json.loads(out.read_text()))


@pytest.fixture(scope="module")
def emulated() -> dict[str, Any]:
    """The single-process emulation at one thread, as every island process runs."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # module scope: runs before the per-test one_thread fixture
    out = {}
    for name in CASES:
        config, start, samples = case_inputs(name)
        out[name] = summary(run_round(start, config, samples), start)
    torch.set_num_threads(before)
    return out


@pytest.mark.parametrize(
    "world", [pytest.param(1, marks=pytest.mark.slow), 2, pytest.param(4, marks=pytest.mark.slow)]
)
def test_island_bytes_equal_the_emulation(
    world: int, tmp_path: Path, emulated: dict[str, Any]
) -> None:
    """DP, ZeRO-1 and (from two processes) expert parallelism: each case's bytes are the
    emulation's; at four processes also dp=2 × ep=2."""
    expected = dict(emulated)
    expected.update({name: emulated[base] for name, (base, _) in ep_cases(world).items()})
    assert len(expected) == len(CASES) + {1: 0, 2: 3, 4: 4}[world]
    assert _launch(world, tmp_path) == expected


def test_shards_cover_every_parameter_once_in_order() -> None:
    shapes = param_shapes(PRESETS["tiny"])
    owners = shard_owners(shapes, 4)
    assert list(owners) == [name for name, _ in shapes]
    ranks = list(owners.values())
    assert ranks == sorted(ranks) and set(ranks) == {0, 1, 2, 3}
    assert set(shard_owners(shapes, 1).values()) == {0}


def test_a_layout_that_does_not_split_is_refused() -> None:
    layout = make_config(layout=(3, 1, 2)).layout
    assert list(local_ranks(layout, RankGroup(1, 3))) == [1]
    with pytest.raises(IslandError, match="do not split"):
        local_ranks(layout, RankGroup(0, 2))


def test_a_process_not_started_by_torchrun_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(IslandError, match="torchrun"):
        init_island()


def test_expert_blocks_are_contiguous_and_cover_every_expert() -> None:
    placements = [ExpertPlacement(8, 2, rank, 4) for rank in range(4)]
    assert [list(p.local) for p in placements] == [[0, 1, 2, 3], [4, 5, 6, 7]] * 2
    assert [p.process_of(1) for p in placements] == [1, 1, 3, 3]
    assert expert_param_names(PRESETS["tiny"]) == []
    names = expert_param_names(PRESETS["tiny-moe"])
    assert names[0] == "layers.0.mlp.experts.gate_proj" and len(names) == 6


@pytest.mark.parametrize(
    ("experts", "ep", "world", "match"),
    [(4, 3, 3, "experts"), (4, 2, 3, "world"), (4, 0, 2, "world")],
)
def test_an_expert_layout_that_does_not_fit_is_refused(
    experts: int, ep: int, world: int, match: str
) -> None:
    with pytest.raises(ExpertLayoutError, match=match):
        ExpertPlacement(experts, ep, 0, world)


def test_expert_parallelism_needs_a_moe_model() -> None:
    config = make_config("tiny", layout=(2, 1, 2))
    start = init_state(config.state_config(), 0)
    with pytest.raises(IslandError, match="mixture-of-experts"):
        Island(start, config, RankGroup(0, 2), ep=2)
