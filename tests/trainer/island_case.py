"""One process of a test island: ``python -m tests.trainer.island_case INIT RANK WORLD OUT``.

Joins a gloo group through a file store (no ports), trains every case of :data:`CASES`
on a real island and, on rank 0, writes each case's leaves, root and update hash as
JSON to ``OUT``. The test compares them with the single-process emulation.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch.distributed as dist

from hypertrain.protocol.manifest import CompressionSpec
from hypertrain.trainer.determinism import configure_determinism
from hypertrain.trainer.distributed import RankGroup, run_island_round
from hypertrain.trainer.segment import RoundResult, TrainConfig
from hypertrain.trainer.state import TrainState, init_state
from hypertrain.trainer.update import build_update
from tests.trainer.conftest import make_config, make_samples

# name -> (preset, optimizer, zero1)
CASES: dict[str, tuple[str, str, bool]] = {
    "dp-adamw": ("tiny", "adamw", False),
    "zero1-adamw": ("tiny", "adamw", True),
    "zero1-muon": ("tiny", "muon", True),
    "dp-moe": ("tiny-moe", "adamw", False),
    "zero1-moe": ("tiny-moe", "muon", True),
}
SEED = 5


def case_inputs(name: str) -> tuple[TrainConfig, TrainState, list[Any]]:
    preset, optimizer, _ = CASES[name]
    config = make_config(preset, layout=(4, 2, 2), steps=4, interval=2, name=optimizer)
    start = init_state(config.state_config(), SEED)
    return config, start, make_samples(4 * config.samples_per_step)


def summary(result: RoundResult, start: TrainState) -> dict[str, Any]:
    update = build_update(start.params(), result.final, CompressionSpec())
    return {
        "leaves": [leaf.hex() for leaf in result.leaves],
        "root": result.root.hex(),
        "update": update.digest.hex(),
    }


def main(argv: list[str]) -> int:
    init, rank, world, out = argv[0], int(argv[1]), int(argv[2]), Path(argv[3])
    configure_determinism(1)
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=world)
    group = RankGroup(rank, world)
    results: dict[str, Any] = {}
    for name, (_, _, zero1) in CASES.items():
        config, start, samples = case_inputs(name)
        result = run_island_round(start, config, samples, group, zero1=zero1)
        if result is not None:
            results[name] = summary(result, start)
    dist.destroy_process_group()
    if rank == 0:
        out.write_text(json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
