"""The pre-registered parity grid (docs/parity.md states it before any result).

The grid is adaptive by rules fixed in advance: :func:`plan` maps the results so far
(final held-out loss of each ``(cell, seed)``) to every task whose inputs are known, in
priority order. The runner re-plans after each finished task, so the two workers never
wait on a stage barrier. Stages (sizes ``s`` ~ 0.13M and ``m`` ~ 0.47M parameters):

1. inner learning-rate sweep, the same three rates for both arms at M = 8 (seed 0):
   data-parallel, and DiLoCo H = 25 with Nesterov 0.7 / 0.9;
2. outer optimizer at M = 8, H = 25, the DiLoCo sweep's best inner rate: lr 0.4 at
   momentum 0.9 and plain averaging (lr 1.0, momentum 0), beside stage 1's 0.7 / 0.9;
3. levers with stage 2's best outer step: H = 5, H = 100, a 10 % data-parallel warm
   start (10 steps) then H = 5;
4. decisive: seeds 1-4 of the best M = 8 cell of stages 1-3 and of the best
   data-parallel rate; then the same recipe (and the tuned data-parallel rate) at M = 2
   and M = 4, and on size ``m`` at M = 8: seed 0 of each first, then seeds 1-2.

The size-``m`` data-parallel cell (seed 0) starts as soon as stage 1 names its rate.
Tasks still unfinished when work stops are reported as not run.

"Best" is always the lowest seed-0 held-out loss. Data-parallel baselines are the sweep's
best rate at the same M and size (``dp-best``), so every gap is against the tuned arm.
"""

from __future__ import annotations

from collections.abc import Mapping

from parity_sim import Cell

LRS = (3e-3, 6e-3, 1.2e-2)
OUTER = ((0.4, 0.9), (1.0, 0.0))  # with stage 1's 0.7 / 0.9: three points
DECISIVE_SEEDS = (0, 1, 2, 3, 4)
TREND_SEEDS = (0, 1, 2)
Task = tuple[Cell, int]
Results = Mapping[tuple[str, int], float]  # (cell name, seed) -> final held-out loss


def dp_cell(m: int, lr: float, size: str = "s") -> Cell:
    return Cell(f"dp-M{m}-{size}-lr{lr:g}", "dp", m, lr=lr, size=size)


def diloco_cell(
    m: int, h: int, lr: float, outer: tuple[float, float], size: str = "s", warm: int = 0
) -> Cell:
    o_lr, mom = outer
    tag = "avg" if mom == 0 and o_lr == 1.0 else f"n{o_lr:g}-{mom:g}"
    warm_tag = f"-warm{warm}" if warm else ""
    return Cell(
        f"diloco-M{m}-{size}-H{h}-{tag}{warm_tag}-lr{lr:g}",
        "diloco",
        m,
        h,
        o_lr,
        mom,
        baseline=f"dp-M{m}-{size}-best",
        lr=lr,
        warm_start=warm,
        size=size,
    )


def _best(cells: list[Cell], results: Results) -> Cell | None:
    """The cell with the lowest seed-0 loss, once every one of them has it."""
    if not cells or any((c.name, 0) not in results for c in cells):
        return None
    return min(cells, key=lambda c: results[(c.name, 0)])


def sweep_cells() -> tuple[list[Cell], list[Cell]]:
    dps = [dp_cell(8, lr) for lr in LRS]
    dls = [diloco_cell(8, 25, lr, (0.7, 0.9)) for lr in LRS]
    return dps, dls


def _recipe_at(cell: Cell, m: int, size: str) -> Cell:
    """The same recipe (H, outer step, warm start, inner rate) at another M or size."""
    outer = (cell.outer_lr, cell.outer_momentum)
    return diloco_cell(m, cell.inner_steps, cell.lr, outer, size, cell.warm_start)


def plan(results: Results) -> list[Task]:
    """Every task whose inputs are known, in priority order (see the module docstring)."""
    dps, dls = sweep_cells()
    tasks: list[Task] = [(c, 0) for c in dps + dls]
    best_dp, best_dl = _best(dps, results), _best(dls, results)
    if best_dp is not None:
        tasks += [(dp_cell(8, best_dp.lr, "m"), 0)]
    if best_dl is None:
        return tasks
    outers = [diloco_cell(8, 25, best_dl.lr, o) for o in OUTER]
    tasks += [(c, 0) for c in outers]
    best_outer = _best([best_dl, *outers], results)
    if best_outer is None:
        return tasks
    o = (best_outer.outer_lr, best_outer.outer_momentum)
    levers = [
        diloco_cell(8, 5, best_dl.lr, o),
        diloco_cell(8, 100, best_dl.lr, o),
        diloco_cell(8, 5, best_dl.lr, o, warm=10),
    ]
    tasks += [(c, 0) for c in levers]
    best = _best([*dls, *outers, *levers], results)
    if best is None or best_dp is None:
        return tasks
    tasks += [(c, s) for s in DECISIVE_SEEDS[1:] for c in (best_dp, best)]
    trend = [(dp_cell(m, best_dp.lr), _recipe_at(best, m, "s")) for m in (2, 4)]
    tasks += [(c, 0) for pair in trend for c in pair]
    tasks += [(_recipe_at(best, 8, "m"), 0)]
    tasks += [(c, s) for s in TREND_SEEDS[1:] for pair in trend for c in pair]
    tasks += [
        (c, s)
        for s in TREND_SEEDS[1:]
        for c in (dp_cell(8, best_dp.lr, "m"), _recipe_at(best, 8, "m"))
    ]
    return tasks


def resolve_baselines(results: Results, names: list[str]) -> dict[str, str]:
    """``dp-M{m}-{size}-best`` -> the data-parallel cell of lowest seed-0 loss there."""
    out: dict[str, str] = {}
    for name in names:
        if not name.startswith("dp-"):
            continue
        key = name.rsplit("-lr", 1)[0] + "-best"
        if (name, 0) not in results:
            continue
        current = out.get(key)
        if current is None or results[(name, 0)] < results[(current, 0)]:
            out[key] = name
    return out
