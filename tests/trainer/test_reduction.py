"""The fixed-order reduce-scatter: its shards, and its bytes against the emulation's fold."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hypertrain.trainer.errors import TrainerError
from hypertrain.trainer.reduction import even_bounds, shard_bounds
from hypertrain.trainer.step import reduce_gradients
from tests.trainer.reduction_case import NUMEL, PER_PROCESS, rank_rows

ROOT = Path(__file__).resolve().parents[2]


def test_even_bounds_cover_the_gradient_in_order() -> None:
    assert even_bounds(10, 4) == [range(3), range(3, 6), range(6, 8), range(8, 10)]
    assert even_bounds(2, 3) == [range(1), range(1, 2), range(2, 2)]  # an empty shard
    assert even_bounds(7, 1) == [range(7)]


def test_shard_bounds_follow_the_owners() -> None:
    assert shard_bounds([0, 0, 1, 2], [3, 4, 5, 6], 3) == [range(7), range(7, 12), range(12, 18)]
    assert shard_bounds([0, 0], [3, 4], 2) == [range(7), range(7, 7)]  # owner of nothing
    with pytest.raises(TrainerError, match="contiguous"):
        shard_bounds([0, 1, 0], [1, 1, 1], 2)


def _emulated(world: int) -> str:
    """The one-process fold of all ``world * PER_PROCESS`` ranks, in rank order."""
    ranks = [{"g": row.clone()} for r in range(world) for row in rank_rows(r)]
    mean = reduce_gradients(ranks, world * PER_PROCESS)["g"]
    return hashlib.sha256(mean.numpy().tobytes()).hexdigest()


def test_reduce_scatter_equals_the_emulation_at_three_processes(tmp_path: Path) -> None:
    """Three processes of two ranks each (where an unordered sum would differ): the
    reduce-scatter over equal and uneven shards gives the emulation's bytes, and holds
    ``W`` times its shard plus the whole mean, not ``W`` full gradients."""
    world, out = 3, tmp_path / "out.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    args = [str(tmp_path / "store"), str(world), str(out)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.trainer.reduction_case", args[0], str(r), *args[1:]],
            cwd=ROOT,
            env=env,
        )
        for r in range(world)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0] * world
    doc = json.loads(out.read_text())
    expected = _emulated(world)
    assert doc["even"] == doc["uneven"] == expected
    shard = len(even_bounds(NUMEL, world)[0])
    assert doc["received"] == world * PER_PROCESS * shard + NUMEL
    rows = torch.stack([row for r in range(world) for row in rank_rows(r)])
    first = reduce_gradients([{"g": row.clone()} for row in rows], len(rows))["g"][:shard]
    assert doc["shard"] == hashlib.sha256(first.numpy().tobytes()).hexdigest()
