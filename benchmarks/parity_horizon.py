"""The recipe at the long run's horizon: does the gap to data-parallel open with rounds?

The 200-round long run (``bench_longrun.py``, docs/parity.md "The long run") saw the gap
between the network and data-parallel on the same tokens open from +2.1 % over rounds
0-49 to +3.6 % over rounds 150-199. The grid's cells are 100 steps, too short to say
which part of the recipe that is. This runs the long run's shape in process, through the
same harness as the grid (``parity.prepare``, ``parity.run_task``: the product's inner
steps, codec, merge, broadcast and start states): M = 3 islands, H = 15, a 10 % warm
start, 200 rounds (3,330 global steps), two windows per island step, size ``s``, and
varies one thing at a time against the recipe new runs get (``protocol.recipe``: plain
averaging, ``carry``, the int8 broadcast, int8 updates without error feedback):

* ``warmmom``: round 0 starts from the warm start's optimizer moments instead of zeros;
* ``n0.7-0.9`` and ``n1-0.5``: a Nesterov outer step instead of plain averaging;
* ``codec``: error feedback on the islands' int8 updates;
* an outer step larger than the average (outer lr 1.2 and 1.5, no momentum);
* a lower inner rate on the islands (4e-3; data-parallel keeps 6e-3);
* H = 10 (1.5 times the round traffic);
* 4-bit updates and broadcast, with and without error feedback on the islands, and 2-bit
  updates with error feedback (4-bit broadcast);
* Muon inner steps (``muon``, at the harness's Muon rate; data-parallel stays AdamW, so
  read the pair, int8 against 4-bit, not the gap), with int8 updates and with 4-bit
  updates and broadcast (``muon-int4``);
* the SparseLoCo-style codec (chunked top-k, 64 of 4,096 values, 2-bit, error feedback;
  4-bit broadcast), with its accumulator's decay (``sparse-decay``: 0.95) and without;
* smaller warm starts (0, 30 and 105 of the 3,330 steps, the rounds filling the rest);
* a prototype of a public optimizer state (``avgstate``; ``avgm``: the first moment
  only): islands start each round from the mean of their optimizer moments, as if the
  aggregator published it with the merge (float32, not yet a product policy);
* a prototype of overlapped rounds (``overlap``, on the 4-bit recipe): each island
  starts round ``r + 1`` from the last merged model (round ``r - 1``'s) minus all of its
  own decoded round-``r`` update (``int4``), half of it (``int4half``), its share of the
  mean (``int4share``), that share plus the last merge's step for the others
  (``int4look``) or none of it (``int4stale``), and receives the merge of round ``r`` one
  round late (``parity_round.diloco_round``'s ``overlap``);
* a prototype of a compact carried state (on the 4-bit recipe): each island's carried
  Adam moments rounded at every round's end as an upload of only the moments would hold
  them (``bf16state``: bfloat16, a third of the training state's bytes; ``q8state``:
  blockwise int8 first moment and 8-bit log codes of the second, about a sixth;
  ``parity_round.round_moments``), which an audit under ``carry`` could fetch instead of
  the island's whole previous final state;
* data-parallel on the same tokens (the same inner rate and schedule).

Task files go to ``benchmarks/results/parity/horizon/`` with the grid's header and this
file's hash; finished tasks are skipped, so a stopped run resumes; ``--part K/N`` runs
every N-th task. ``--combine`` prints each cell's paired gap to data-parallel, over the
whole run and by blocks of 50 rounds, and writes ``parity-horizon.json``.

Run: ``nice -n 19 python benchmarks/parity_horizon.py --part 0/2`` (and ``1/2``);
``--cell int4,avgstate`` runs only the cells whose names contain one of those words.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]

from parity_grid import diloco_cell, dp_cell  # noqa: E402
from parity_sim import Cell  # noqa: E402
from parity_stats import files_sha256  # noqa: E402

M, H, LR = 3, 15, 6e-3
WARM, ROUNDS = 330, 200
STEPS = WARM + ROUNDS * H
SEEDS = (0, 1, 2)
# Smaller warm starts (of the same 3,330 steps: 0 %, 0.9 %, 3.2 %): the rounds grow to
# fill the steps, so the all-in traffic ratio's cap (the warm start's share) rises.
WARM_SIZES = (0, 30, 105)
BLOCK = 50 * H  # steps per block of 50 rounds
OUT = HERE / "results" / "parity" / "horizon"
# Cells seed 0 put clearly behind the recipe (docs/parity.md): not run on seeds 1-2.
DROPPED = frozenset({
    "diloco-M3-s-H15-n0.7-0.9-warm330-carry-lr0.006",
    "diloco-M3-s-H15-n1-0.5-warm330-carry-lr0.006",
    "diloco-M3-s-H15-n1.2-0-warm330-carry-lr0.006",
    "diloco-M3-s-H15-n1.5-0-warm330-carry-lr0.006",
    "diloco-M3-s-H15-avg-warm330-carry-lr0.004",
})  # fmt: skip
ARGS = ["--steps", str(STEPS), "--batch", "2", "--eval-every", str(BLOCK // 5)]


def recipe(outer: tuple[float, float] = (1.0, 0.0), **changes: Any) -> Cell:
    """The recipe with ``changes`` (Cell fields), named by them."""
    h, lr = int(changes.pop("inner_steps", H)), float(changes.pop("lr", LR))
    extra = f"-{changes.pop('name_tag')}" if "name_tag" in changes else ""
    warm = int(changes.pop("warm", WARM))
    base = diloco_cell(M, h, lr, outer, warm=warm)
    tag = "".join(f"-{k}" for k, v in changes.items() if v is True or isinstance(v, str))
    stem = base.name.rsplit("-lr", 1)[0]
    cell = replace(base, policy="carry", broadcast=True, codec="int8-noef", exploratory=True)
    return replace(cell, name=f"{stem}-carry{tag}{extra}-lr{lr:g}", **changes)


def cells() -> list[Cell]:
    dp = replace(dp_cell(M, LR), exploratory=True)
    return [
        dp,
        recipe(),
        recipe(warm_moments=True),
        recipe((0.7, 0.9)),
        recipe((1.0, 0.5)),
        recipe(codec="int8"),
        recipe((1.2, 0.0)),
        recipe((1.5, 0.0)),
        recipe(lr=4e-3),
        recipe(inner_steps=10),
        recipe(average=("optim.",), name_tag="avgstate"),
        recipe(average=("optim.exp_avg.",), name_tag="avgm"),
        *(recipe(warm=w) for w in WARM_SIZES),
        recipe(codec="int4-noef", broadcast_bits=4, name_tag="int4"),
        recipe(codec="int4", broadcast_bits=4, name_tag="int4ef"),
        recipe(codec="int2", broadcast_bits=4, name_tag="int2ef"),
        recipe(optimizer="muon", name_tag="muon"),
        recipe(optimizer="muon", codec="int4-noef", broadcast_bits=4, name_tag="muon-int4"),
        recipe(codec="sparse", broadcast_bits=4, name_tag="sparse"),
        recipe(codec="sparse-decay", broadcast_bits=4, name_tag="sparse-decay"),
        recipe(codec="int4-noef", broadcast_bits=4, overlap="own", name_tag="int4"),
        recipe(codec="int4-noef", broadcast_bits=4, overlap="share", name_tag="int4share"),
        recipe(codec="int4-noef", broadcast_bits=4, overlap="stale", name_tag="int4stale"),
        recipe(codec="int4-noef", broadcast_bits=4, overlap="half", name_tag="int4half"),
        recipe(codec="int4-noef", broadcast_bits=4, overlap="lookahead", name_tag="int4look"),
        recipe(codec="int4-noef", broadcast_bits=4, carry_bits=16, name_tag="int4-bf16state"),
        recipe(codec="int4-noef", broadcast_bits=4, carry_bits=8, name_tag="int4-q8state"),
    ]


def run(argv: list[str]) -> int:
    import parity

    args = parity.parse([*ARGS, *argv])
    args.grid, args.out_dir = "horizon", OUT
    ctx = parity.prepare(args)
    head = {**ctx["header"], "horizon_sha256": files_sha256(["benchmarks/parity_horizon.py"])}
    k, n = (int(x) for x in args.part.split("/"))
    todo = [(c, s) for s in SEEDS for c in cells() if s == 0 or c.name not in DROPPED]
    if args.cell:  # --cell TEXT: only the cells whose names contain one of TEXT's words
        todo = [t for t in todo if any(w in t[0].name for w in args.cell.split(","))]
    done = parity.load_done(OUT)
    for i, (cell, seed) in enumerate(todo):
        if i % n != k or (cell.name, seed) in done:
            continue
        record = parity.run_task(cell, seed, ctx["setups"][cell.size], ctx["data"])
        parity.write_task(OUT, head, record)
        print(f"{cell.name} seed {seed}: {record['final_loss']:.4f}"
              f" ({record['wall_seconds']:.0f} s)", flush=True)  # fmt: skip
    return 0


def _gap(a: list[float], b: list[float]) -> float:
    return 100 * statistics.fmean(x / y - 1 for x, y in zip(a, b, strict=True))


def combine() -> dict[str, Any]:
    """Each cell's gap to data-parallel, paired by seed: final, and mean over each block."""
    tasks: dict[str, dict[int, dict[str, Any]]] = {}
    for p in sorted(OUT.glob("*--seed*.json")):
        t = json.loads(p.read_text())["task"]
        tasks.setdefault(t["name"], {})[t["seed"]] = t
    dp = next(n for n in tasks if n.startswith("dp-"))
    out: dict[str, Any] = {"steps": STEPS, "islands": M, "inner_steps": H, "cells": {}}
    for name, by_seed in tasks.items():
        seeds = sorted(s for s in by_seed if s in tasks[dp])
        if name == dp or not seeds:
            continue
        blocks = []
        for b in range(ROUNDS * H // BLOCK):
            lo, hi = WARM + b * BLOCK, WARM + (b + 1) * BLOCK
            per = []
            for s in seeds:
                ours = {st: v for st, v in by_seed[s]["curve"] if lo < st <= hi}
                base = {st: v for st, v in tasks[dp][s]["curve"] if lo < st <= hi}
                both = sorted(set(ours) & set(base))
                per.append(_gap([ours[x] for x in both], [base[x] for x in both]))
            blocks.append(round(statistics.fmean(per), 3))
        finals = [by_seed[s]["final_loss"] for s in seeds]
        out["cells"][name] = {
            "seeds": seeds,
            "final_loss": finals,
            "final_gap_pct": round(_gap(finals, [tasks[dp][s]["final_loss"] for s in seeds]), 3),
            "gap_by_block_pct": blocks,
        }
    from common import write_result
    from longrun_report import commit

    out["commit"] = commit()
    write_result("parity-horizon", out, notes=NOTES)
    return out


NOTES = (
    "The long run's shape in process (parity harness, the product's inner steps, codec,"
    " merge, broadcast and start states): M = 3, H = 15, 200 rounds after a 330-step warm"
    " start, size s; each cell's held-out loss against data-parallel on the same tokens,"
    " paired by seed, final and over blocks of 50 rounds (benchmarks/parity_horizon.py;"
    " docs/parity.md, 'The recipe at the long run's horizon')."
)


def table(out: dict[str, Any]) -> str:
    """docs/parity.md's table of the combined cells, best final gap first, with each
    cell's final loss against the recipe's on the seeds both ran (paired)."""
    head = "| cell | seeds | gap at round 199, % | vs the recipe, % | gap by 50 rounds, % |"
    rows = [head, "|---|---:|---:|---:|---|"]
    base = out["cells"][recipe().name]
    for name, c in sorted(out["cells"].items(), key=lambda kv: kv[1]["final_gap_pct"]):
        shared = [s for s in c["seeds"] if s in base["seeds"]]
        mine = [c["final_loss"][c["seeds"].index(s)] for s in shared]
        theirs = [base["final_loss"][base["seeds"].index(s)] for s in shared]
        vs = f"{_gap(mine, theirs):+.2f}" if name != recipe().name else "—"
        blocks = " / ".join(f"{b:+.2f}" for b in c["gap_by_block_pct"])
        rows.append(f"| {name} | {len(c['seeds'])} | {c['final_gap_pct']:+.2f} | {vs} | {blocks} |")
    return "\n".join(rows)


if __name__ == "__main__":
    if "--combine" in sys.argv:
        print(table(combine()))
        raise SystemExit(0)
    raise SystemExit(run(sys.argv[1:]))
