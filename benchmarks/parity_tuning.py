"""Both arms' inner learning rate tuned on several seeds, and Muon, at the grid's shapes.

The pre-registered grid picked each arm's rate on seed 0 alone (docs/parity.md), and its
data-parallel winner sat at the low edge of its sweep. Here both arms are swept on
three seeds per rate, with the same harness, data and shapes as the grid
(``parity.prepare``, ``parity.run_task``):

* data-parallel at M = 8, size ``s``: {1.5e-3, 3e-3, 6e-3, 1.2e-2};
* the recipe ``hypertrain run init`` writes (:func:`product_cell`, from
  ``protocol.recipe``: a 10 % warm start, plain averaging with the int8 broadcast,
  ``carry``; H = 15, ``run init``'s default): {3e-3, 6e-3, 1.2e-2};
* "best" is the lowest mean held-out loss over the seeds; while an arm's best rate is the
  lowest or highest it ran, the sweep adds the rate half or twice as large (at most two
  added per arm), so each winner has a rate run on either side;
* then the recipe with Muon inner steps (``InnerOptimSpec.name = "muon"``: Muon on the
  hidden matrices at ``muon_lr``, AdamW at the recipe's best rate on embeddings and
  gains): ``muon_lr`` in {0.01, 0.02, 0.04} on seed 0, then seeds 1-2 of the best.

Task files go to ``benchmarks/results/parity/tuning/`` with the grid's header and
``explore_sha256`` (this file and ``parity_explore.py``), so ``parity_plots.load_tasks``
refuses them once any hashed file changes. The plan is re-read after every task, so a
stopped run resumes; ``--part K/N`` runs in N processes that share the plan.

Run: ``nice -n 19 python benchmarks/parity_tuning.py [--part K/N]``, then
``python benchmarks/parity_tuning.py --combine`` (writes ``parity-tuning.json`` beside
the folder and prints the tables of docs/parity.md, "Tuning both arms, and Muon").
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]

from hypertrain.protocol.recipe import WARM_START_PERCENT  # noqa: E402
from parity_grid import diloco_cell, dp_cell  # noqa: E402
from parity_sim import Cell, Setup  # noqa: E402
from parity_stats import EXPLORE_FILES, files_sha256, paired_gap  # noqa: E402

DP_LRS = (1.5e-3, 3e-3, 6e-3, 1.2e-2)  # the grid's three and one below its winner
PRODUCT_LRS = (3e-3, 6e-3, 1.2e-2)
MUON_LRS = (0.01, 0.02, 0.04)
SEEDS = (0, 1, 2)
MAX_ADDED = 2  # rates a sweep may add beyond its edges
OUT = HERE / "results" / "parity" / "tuning"
Results = Mapping[tuple[str, int], float]


def product_cell(lr: float, muon_lr: float = 0.0) -> Cell:
    """The recipe new runs use (``protocol.recipe``: OUTER_STEP, STATE_POLICY,
    WARM_START_PERCENT; H = 15) at M = 8, size ``s``; Muon inner steps when ``muon_lr``."""
    base = diloco_cell(8, 15, lr, (1.0, 0.0), warm=WARM_START_PERCENT)  # of 100 steps
    tag = "-carry" + (f"-muon{muon_lr:g}" if muon_lr else "")
    return replace(
        base,
        name=f"{base.name.rsplit('-lr', 1)[0]}{tag}-lr{lr:g}",
        policy="carry",
        broadcast=True,
        optimizer="muon" if muon_lr else "adamw",
        exploratory=True,
    )


def dp_tuned(lr: float) -> Cell:
    return replace(dp_cell(8, lr), exploratory=True)


def muon_lr_of(cell: Cell) -> float:
    """The Muon rate a :func:`product_cell` name carries (0 for AdamW cells)."""
    if cell.optimizer != "muon":
        return 0.0
    return float(cell.name.split("-muon", 1)[1].split("-", 1)[0])


def task_setup(cell: Cell, setups: Mapping[str, Setup]) -> Setup:
    setup = setups[cell.size]
    return replace(setup, muon_lr=muon_lr_of(cell)) if cell.optimizer == "muon" else setup


def _mean(cell: Cell, done: Results) -> float | None:
    losses = [done.get((cell.name, s)) for s in SEEDS]
    return None if any(v is None for v in losses) else statistics.fmean(losses)  # type: ignore[arg-type]


def sweep(
    make: Callable[[float], Cell], rates: tuple[float, ...], done: Results
) -> tuple[list[Cell], Cell | None]:
    """(the sweep's cells, its best once every rate has every seed), extended by halving
    or doubling while the best is at an edge (module docstring)."""
    lrs = sorted(rates)
    while True:
        cells = [make(lr) for lr in lrs]
        means = [_mean(c, done) for c in cells]
        if any(m is None for m in means):
            return cells, None
        i = min(range(len(cells)), key=lambda j: means[j])  # type: ignore[arg-type,return-value]
        if len(lrs) - len(rates) >= MAX_ADDED or 0 < i < len(lrs) - 1:
            return cells, cells[i]
        lrs = [lrs[0] / 2, *lrs] if i == 0 else [*lrs, lrs[-1] * 2]


def tasks(done: Results) -> list[tuple[Cell, int]]:
    """Every task whose inputs are known, in priority order."""
    dps, _ = sweep(dp_tuned, DP_LRS, done)
    pcs, best = sweep(product_cell, PRODUCT_LRS, done)
    out = [(c, s) for s in SEEDS for c in [*dps, *pcs]]
    if best is None:
        return out
    muons = [product_cell(best.lr, m) for m in MUON_LRS]
    out += [(c, 0) for c in muons]
    if all((c.name, 0) in done for c in muons):
        top = min(muons, key=lambda c: done[(c.name, 0)])
        out += [(top, s) for s in SEEDS[1:]]
    return out


def run(argv: list[str]) -> int:
    import parity

    args = parity.parse(argv)
    args.grid, args.out_dir = "tuning", OUT if "--out-dir" not in argv else args.out_dir
    ctx = parity.prepare(args)
    head = {**ctx["header"], "explore_sha256": files_sha256(EXPLORE_FILES)}
    k, n = (int(x) for x in args.part.split("/"))
    while True:
        done = parity.load_done(args.out_dir)
        todo = [t for t in tasks(done) if (t[0].name, t[1]) not in done]
        mine = [t for t in todo if zlib.crc32(f"{t[0].name}/{t[1]}".encode()) % n == k]
        if not todo:
            return 0
        if not mine:  # another part's task decides what comes next
            time.sleep(15)
            continue
        cell, seed = mine[0]
        setup = task_setup(cell, ctx["setups"])
        record = parity.run_task(cell, seed, setup, ctx["data"])
        record["muon_lr"] = muon_lr_of(cell) or None
        parity.write_task(args.out_dir, head, record)
        print(f"{cell.name} seed {seed}: {record['final_loss']:.4f}"
              f" ({record['wall_seconds']:.0f} s)", flush=True)  # fmt: skip


def _rates(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "name": c["name"],
            "lr": c["lr"],
            "muon_lr": c.get("muon_lr"),
            "seeds": c["seeds"],
            "final_loss": c["final_loss"],
            "mean": c["final_loss_mean"],
            "sd": c["final_loss_sd"],
            "wall_s_mean": statistics.fmean(c["wall_seconds"]),
        }
        for c in sorted(cells, key=lambda c: (c.get("muon_lr") or 0, c["lr"]))
    ]


def _best(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    full = [r for r in rows if len(r["seeds"]) >= len(SEEDS)]
    return min(full, key=lambda r: r["mean"]) if full else None


def tuning_summary(cells: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each arm's rates (mean ± sd over seeds), its winner, and the paired gaps."""
    dp = _rates([c for c in cells.values() if c["kind"] == "dp"])
    ours = [c for c in cells.values() if c["kind"] == "diloco"]
    adam = _rates([c for c in ours if c["optimizer"] == "adamw"])
    muon = _rates([c for c in ours if c["optimizer"] == "muon"])
    best = {"dp": _best(dp), "product": _best(adam), "muon": _best(muon)}
    out: dict[str, Any] = {"dp": dp, "product": adam, "muon": muon}
    out["best"] = {k: v and v["name"] for k, v in best.items()}
    if best["dp"]:
        sd = [r["sd"] for r in dp if len(r["seeds"]) > 1]
        out["dp_seed_sd_pct_of_mean"] = {
            r["name"]: 100 * r["sd"] / r["mean"] for r in dp if len(r["seeds"]) > 1
        }
        out["dp_seed_sd_pooled"] = statistics.fmean(s * s for s in sd) ** 0.5 if sd else None
    pairs = {"product_vs_dp": ("product", "dp"), "muon_vs_dp": ("muon", "dp")}
    pairs["muon_vs_product"] = ("muon", "product")
    for key, (a, b) in pairs.items():
        if best[a] and best[b]:
            gap = paired_gap(cells[best[a]["name"]], cells[best[b]["name"]])
            out[key] = {"cell": best[a]["name"], "against": best[b]["name"], **(gap or {})}
    return out


def table(summary: dict[str, Any]) -> str:
    """The Markdown table of every swept rate, winners in bold."""
    lines = [
        "| arm | rate | seeds | held-out loss per seed | mean ± sd |",
        "|---|---:|---:|---|---:|",
    ]
    arms = (("dp", "data-parallel"), ("product", "recipe, AdamW"), ("muon", "recipe, Muon"))
    for key, label in arms:
        for r in summary[key]:
            rate = f"{r['lr']:g}" if key != "muon" else f"muon {r['muon_lr']:g} (AdamW {r['lr']:g})"
            win = r["name"] == summary["best"][key]
            mean = f"{r['mean']:.4f} ± {r['sd']:.4f}"
            lines.append(
                f"| {label} | {rate} | {len(r['seeds'])} |"
                f" {', '.join(f'{v:.4f}' for v in r['final_loss'])} |"
                f" {f'**{mean}**' if win else mean} |"
            )
    return "\n".join(lines)


def combine_folder(folder: Path, out: Path) -> int:
    from parity_plots import StaleResultError, load_tasks
    from parity_stats import combine

    try:
        head, records = load_tasks(folder)
    except StaleResultError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    cells = combine(records)  # each cell keeps its first record's fields, muon_lr among them
    summary = tuning_summary(cells)
    out.write_text(json.dumps({**head, "cells": cells, "tuning": summary}, indent=1) + "\n")
    print(table(summary))
    print(json.dumps({k: v for k, v in summary.items() if k not in ("dp", "product", "muon")},
                     indent=1))  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--combine" in argv:
        return combine_folder(OUT, OUT.parent / "parity-tuning.json")
    return run(argv)


if __name__ == "__main__":
    raise SystemExit(main())
