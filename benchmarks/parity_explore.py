"""Exploratory parity cells, added after the pre-registered grid (docs/parity.md).

The same harness runs them (``parity.run_task`` on ``parity.prepare``'s data and setups),
so a cell here differs from a grid cell only in its configuration, and each task file
says ``exploratory: true``. They cover what the grid left out and the product needs:

* ``reset`` against ``carry`` (the product's default inner policy is ``reset``);
* a SparseLoCo-style codec: top-k sparsification (1.6 % density), 2-bit values and
  error feedback, with plain averaging as the outer step;
* a third model size ``l`` (about 1.7M parameters), three seeds of the best recipe and
  of data-parallel;
* seeds the grid did not plan, of cells it did: 1-4 of the default-class cell and of
  plain averaging at H = 25 and H = 5 (so the default rule is decided on paired seeds),
  and 3-4 of every cell the decisive stage ran on three seeds;
* the product's warm-start recipe (``reset``, plain averaging, a 10-step data-parallel
  warm start) at longer rounds, H = 15, 30 and 45, and with a 20-step warm start at
  H = 5: how much of the warm start's gain survives the traffic of longer rounds;
* the recipe ``run init`` writes now (``parity_tuning.product_cell``: 10 % warm start,
  plain averaging, H = 15, ``carry``, the int8 broadcast), five seeds. Both arms' rate
  sweeps and Muon run from ``benchmarks/parity_tuning.py`` into their own folder.

Task files go to the grid's folder, beside the grid's, and record the hash of this file
(``explore_sha256``) as well as the harness and trainer hashes, so ``parity_plots.py``
refuses them once any of those files changes. Finished tasks are skipped, so a stopped
run resumes.

Run: ``nice -n 19 python benchmarks/parity_explore.py`` (one process, in priority order;
``--part K/N`` runs every N-th task from K, so N processes share the list).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]

import parity  # noqa: E402
from hypertrain.protocol.manifest import ModelSpec  # noqa: E402
from hypertrain.trainer.presets import param_count  # noqa: E402
from parity_grid import Results, diloco_cell, dp_cell, plan  # noqa: E402
from parity_sim import Cell, Setup  # noqa: E402
from parity_stats import EXPLORE_FILES, files_sha256  # noqa: E402
from parity_tuning import product_cell  # noqa: E402

LARGE = (256, 2, 704)  # d_model, layers, ffn_hidden: about 1.7M parameters at vocab 512
AVG = (1.0, 0.0)
LR = 6e-3  # the grid's best DiLoCo inner rate; data-parallel's best was 3e-3


def _explore(cell: Cell, **changes: object) -> Cell:
    """``cell`` with ``changes``, its name tagged by them, marked exploratory."""
    tag = "".join(f"-{v}" for v in changes.values())
    base = cell.name.rsplit("-lr", 1)
    return replace(cell, name=f"{base[0]}{tag}-lr{base[1]}", exploratory=True, **changes)  # type: ignore[arg-type]


def added_seeds(done: Results) -> list[tuple[Cell, int]]:
    """Seeds the grid did not plan, of cells it planned (see the module docstring)."""
    planned: dict[str, Cell] = {}
    seeds: defaultdict[str, set[int]] = defaultdict(set)
    for cell, seed in plan(done):
        planned[cell.name] = cell
        seeds[cell.name].add(seed)
    named = [diloco_cell(8, 25, LR, (0.7, 0.9)), diloco_cell(8, 25, LR, AVG)]
    named.append(diloco_cell(8, 5, LR, AVG))
    out = [(replace(c, exploratory=True), s) for c in named for s in range(1, 5)]
    three = [planned[n] for n, s in seeds.items() if s == {0, 1, 2}]
    return out + [(replace(c, exploratory=True), s) for c in three for s in (3, 4)]


def cells(done: Results) -> list[tuple[Cell, int]]:
    """Every exploratory task, in priority order."""
    reset_h25 = _explore(diloco_cell(8, 25, LR, AVG), policy="reset")
    reset_warm = _explore(diloco_cell(8, 5, LR, AVG, warm=10), policy="reset")
    sparse = _explore(diloco_cell(8, 25, LR, AVG), codec="sparse")
    large = [
        replace(dp_cell(8, 3e-3, "l"), exploratory=True),
        replace(diloco_cell(8, 5, LR, AVG, "l", warm=10), exploratory=True),
    ]
    longer = [
        _explore(diloco_cell(8, h, LR, AVG, warm=w), policy="reset")
        for h, w in ((15, 10), (30, 10), (45, 10), (5, 20))
    ]
    small = [(c, s) for s in range(5) for c in (reset_h25, reset_warm, sparse, *longer)]
    product = [(product_cell(LR), s) for s in range(5)]
    return added_seeds(done) + small + [(c, s) for s in range(3) for c in large] + product


def large_setup(medium: Setup) -> Setup:
    """Size ``l``: the medium setup with a wider model."""
    d, layers, ffn = LARGE
    model = ModelSpec(
        **{
            **medium.model.model_dump(),
            "preset": "parity-l",
            "d_model": d,
            "num_layers": layers,
            "head_dim": d // 2,
            "ffn_hidden": ffn,
        }
    )
    return replace(medium, model=model)


def main(argv: list[str] | None = None) -> int:
    args = parity.parse(argv)
    args.grid = "exploratory"
    ctx = parity.prepare(args)
    ctx["setups"]["l"] = large_setup(ctx["setups"]["m"])
    large = ctx["setups"]["l"].model
    head = {**ctx["header"], "explore_sha256": files_sha256(EXPLORE_FILES)}
    head["setups"] = {
        **head["setups"],
        "l": {"model": large.model_dump(mode="json"), "parameters": param_count(large)},
    }
    done = parity.load_done(args.out_dir)
    k, n = (int(x) for x in args.part.split("/"))
    for cell, seed in cells(done)[k::n]:
        if (cell.name, seed) in done:
            continue
        record = parity.run_task(cell, seed, ctx["setups"][cell.size], ctx["data"])
        parity.write_task(args.out_dir, head, record)
        print(f"{cell.name} seed {seed}: {record['final_loss']:.4f}"
              f" ({record['wall_seconds']:.0f} s)", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
