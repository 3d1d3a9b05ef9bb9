"""One process of a test island: ``python -m tests.trainer.island_case INIT RANK WORLD OUT``.

Joins a gloo group through a file store (no ports), trains every case of :data:`CASES`
on a real island (and each expert-parallel case of :data:`EP_CASES` that the world
size admits) and, on rank 0, writes each case's leaves, root and update hash as JSON to
``OUT``. The test compares them with the single-process emulation.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import torch.distributed as dist

from hypertrain.protocol.manifest import CompressionSpec, MoESpec
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
    "top1-capacity-moe": ("tiny-moe-top1", "adamw", False),
}
# expert-parallel case -> (the emulated case it must equal, ep; 0 = the whole world)
EP_CASES: dict[str, tuple[str, int]] = {
    "ep-moe": ("dp-moe", 0),
    "ep-zero1-moe": ("zero1-moe", 0),
    "ep-top1-capacity-moe": ("top1-capacity-moe", 0),
    "dp2-ep2-zero1-moe": ("zero1-moe", 2),
}
# top-1 routing with dropped tokens: experts left idle, capacity cuts, lone active experts
TOP1 = MoESpec(num_experts=4, top_k=1, capacity_factor=0.5)
SEED = 5


def ep_cases(world: int) -> dict[str, tuple[str, int]]:
    """The expert-parallel cases a world of ``world`` processes runs: name -> (case, ep)."""
    out = {}
    for name, (base, ep) in EP_CASES.items():
        ep = ep or world
        if 1 < ep <= world and world % ep == 0 and name.startswith("dp") == (ep < world):
            out[name] = (base, ep)
    return out


def case_inputs(name: str) -> tuple[TrainConfig, TrainState, list[Any]]:
    preset, optimizer, _ = CASES[name]
    base = "tiny-moe" if preset == "tiny-moe-top1" else preset
    config = make_config(base, layout=(4, 2, 2), steps=4, interval=2, name=optimizer)
    if preset == "tiny-moe-top1":
        model = config.model.model_copy(update={"moe": TOP1})
        config = dataclasses.replace(config, model=model)
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
    for name, (base, ep) in ep_cases(world).items():
        config, start, samples = case_inputs(base)
        result = run_island_round(start, config, samples, group, zero1=CASES[base][2], ep=ep)
        if result is not None:
            results[name] = summary(result, start)
    dist.destroy_process_group()
    if rank == 0:
        out.write_text(json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
