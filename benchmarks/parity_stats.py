"""Provenance and statistics of parity results.

* :func:`provenance`: the git commit and the SHA-256 of the harness files and of the
  trainer files the harness runs; :func:`stale_files` says which changed since a result.
* :func:`combine`: per-``(cell, seed)`` task records into cells with paired gaps against
  their data-parallel baseline (the best rate of its sweep), the 90 % interval and the
  ±0.5 % TOST verdict (decided equivalent, decided not equivalent, or undecided).
"""

from __future__ import annotations

import hashlib
import math
import statistics
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

from parity_grid import resolve_baselines

ROOT = Path(__file__).resolve().parents[1]
MARGIN_PCT = 0.5
HARNESS_FILES = (
    "benchmarks/parity.py",
    "benchmarks/parity_grid.py",
    "benchmarks/parity_identity.py",
    "benchmarks/parity_round.py",
    "benchmarks/parity_sim.py",
)  # what produces the numbers; parity_stats / parity_plots recompute from them
EXPLORE_FILES = (
    "benchmarks/parity_explore.py",
    "benchmarks/parity_tuning.py",
)  # the exploratory cells' definitions
TRAINER_FILES = tuple(
    f"src/hypertrain/{p}.py"
    for p in (
        "trainer/round_config", "trainer/segment", "trainer/step", "trainer/optim",
        "trainer/model", "trainer/state", "trainer/update", "trainer/codec",
        "trainer/sparse_codec", "trainer/blob", "trainer/checkpoint", "trainer/start_state",
        "trainer/warm_start", "trainer/broadcast", "aggregator/combine", "aggregator/norms",
        "aggregator/dedup", "aggregator/screen", "aggregator/aggregate", "aggregator/robust",
        "aggregator/gram", "aggregator/outer", "protocol/manifest", "protocol/traffic",
    )
)  # fmt: skip
# one-sided 95 % Student-t quantiles (a two-sided 90 % interval) by degrees of freedom
T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833}


def files_sha256(paths: tuple[str, ...]) -> str:
    """SHA-256 over each file's path and bytes, in the given order."""
    h = hashlib.sha256()
    for rel in paths:
        h.update(rel.encode() + b"\0" + (ROOT / rel).read_bytes() + b"\0")
    return h.hexdigest()


def _git(*cmd: str) -> str:
    done = subprocess.run(["git", *cmd], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip()


def provenance() -> dict[str, Any]:
    """The commit, whether harness or trainer files differ from it, and their hashes."""
    dirty = _git("status", "--porcelain", "--", *HARNESS_FILES, *TRAINER_FILES)
    return {
        "commit": _git("rev-parse", "HEAD"),
        "harness_dirty": bool(dirty),
        "harness_sha256": files_sha256(HARNESS_FILES),
        "trainer_sha256": files_sha256(TRAINER_FILES),
    }


def stale_files(doc: dict[str, Any]) -> list[str]:
    """Which of the harness / trainer hashes of a result differ from the files now."""
    now = {
        "harness_sha256": files_sha256(HARNESS_FILES),
        "trainer_sha256": files_sha256(TRAINER_FILES),
    }
    if "explore_sha256" in doc:  # an exploratory task: its cells' file too
        now["explore_sha256"] = files_sha256(EXPLORE_FILES)
    return [k for k, v in now.items() if doc.get(k) != v]


def gap_stats(gaps: list[float]) -> dict[str, Any]:
    """Mean paired gap (%), its 90 % interval (Student t) and the ±0.5 % TOST verdict."""
    n = len(gaps)
    mean = statistics.fmean(gaps)
    if n < 2:  # no spread, so no interval and no verdict
        return {
            "seeds_paired": n, "gap_pct_mean": mean, "gap_pct_sd": None, "gap_pct_ci90": None,
            "tost": "undecided (one seed)", "non_inferior": False,
        }  # fmt: skip
    sd = statistics.stdev(gaps)
    half = T95.get(n - 1, 1.645) * sd / math.sqrt(n)
    lo, hi = mean - half, mean + half
    if lo > -MARGIN_PCT and hi < MARGIN_PCT:
        tost = "equivalent"
    elif lo > MARGIN_PCT or hi < -MARGIN_PCT:
        tost = "not equivalent"
    else:
        tost = "undecided"
    return {
        "seeds_paired": n,
        "gap_pct_mean": mean,
        "gap_pct_sd": sd,
        "gap_pct_ci90": [lo, hi],
        "tost": tost,
        "non_inferior": bool(hi < MARGIN_PCT),
    }


def _cell_of(records: list[dict[str, Any]]) -> dict[str, Any]:
    records = sorted(records, key=lambda r: r["seed"])
    first = records[0]
    finals = [r["final_loss"] for r in records]
    keep = {k: v for k, v in first.items() if k not in ("seed", "final_loss", "curve")}
    recipe = "dp" if first["kind"] == "dp" else first["name"].split("-", 3)[3]
    return {
        **keep,
        "recipe": recipe,
        "seeds": [r["seed"] for r in records],
        "final_loss": finals,
        "final_loss_mean": statistics.fmean(finals),
        "final_loss_sd": statistics.stdev(finals) if len(finals) > 1 else 0.0,
        "curves": [r["curve"] for r in records],
        "wall_seconds": [r["wall_seconds"] for r in records],
        "exploratory": any(r.get("exploratory") for r in records),
    }


def combine(tasks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Cells (by name) with paired gaps against their resolved data-parallel baseline."""
    by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in tasks:
        by_name[t["name"]].append(t)
    cells = {name: _cell_of(rs) for name, rs in by_name.items()}
    seed0 = {(t["name"], t["seed"]): t["final_loss"] for t in tasks}
    best = resolve_baselines(seed0, list(cells))
    for cell in cells.values():
        base = cells.get(best.get(cell["baseline"], cell["baseline"]))
        if base is None or cell["kind"] == "dp":
            continue
        base_by_seed = dict(zip(base["seeds"], base["final_loss"], strict=True))
        gaps = [
            100.0 * (a - base_by_seed[s]) / base_by_seed[s]
            for s, a in zip(cell["seeds"], cell["final_loss"], strict=True)
            if s in base_by_seed
        ]
        if not gaps:
            continue
        cell.update({"baseline_cell": base["name"], "gap_pct": gaps, **gap_stats(gaps)})
    return cells


LITERATURE_35M_PCT = {2: 0.7, 4: 2.0, 8: 3.9}  # Scaling Laws for DiLoCo, Table 4
# The product's recipe before this grid (manifest default Nesterov 0.7 / 0.9, H = 25 class):
# the pre-registered rule changes the default only for a cell that beats it, paired by
# seed, with a decided interval (docs/parity.md, "The product default").
DEFAULT_RECIPE_CELL = "diloco-M8-s-H25-n0.7-0.9-lr0.006"
# The recipe new runs use (``hypertrain run init``, the devnet: protocol.recipe and
# ops.manifest.RunOptions; tests/benchmarks/test_parity.py checks they agree): the
# recipe's warm-start share of the grid's 100 steps and plain averaging with the
# broadcast, the ``carry`` policy and H = 15 (docs/parity.md, "The product default"), the
# recipe's H until the long run moved it to 20 (docs/parity.md, "The long run").
PRODUCT_RECIPE_CELL = "diloco-M8-s-H15-avg-carry-lr0.006"


def paired_gap(cell: dict[str, Any], base: dict[str, Any]) -> dict[str, Any] | None:
    """``cell`` against ``base`` (% of ``base``'s loss), paired by seed; None if no pair."""
    base_by_seed = dict(zip(base["seeds"], base["final_loss"], strict=True))
    gaps = [
        100.0 * (a - base_by_seed[s]) / base_by_seed[s]
        for s, a in zip(cell["seeds"], cell["final_loss"], strict=True)
        if s in base_by_seed
    ]
    return gap_stats(gaps) if gaps else None


def against_default(cells: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every M = 8 size-s DiLoCo cell against the default recipe's cell, best first:
    ``beats`` when the paired 90 % interval lies wholly below 0, ``worse`` wholly above."""
    base = cells.get(DEFAULT_RECIPE_CELL)
    if base is None:
        return []
    rows = []
    for c in cells.values():
        if c["kind"] == "dp" or c["islands"] != 8 or c["size"] != "s" or c is base:
            continue
        stats = paired_gap(c, base)
        if stats is None:
            continue
        ci = stats["gap_pct_ci90"]
        verdict = "undecided" if ci is None or ci[0] <= 0 <= ci[1] else (
            "beats" if ci[1] < 0 else "worse"
        )  # fmt: skip
        rows.append({
            "name": c["name"], "recipe": c["recipe"], "seeds_paired": stats["seeds_paired"],
            "gap_pct_mean": stats["gap_pct_mean"], "gap_pct_ci90": ci, "verdict": verdict,
            "exploratory": c["exploratory"], "dp_bytes_per_byte_sent":
            c.get("dp_bytes_per_byte_sent"),
        })  # fmt: skip
    return sorted(rows, key=lambda r: r["gap_pct_mean"])


def _brief(c: dict[str, Any]) -> dict[str, Any]:
    keys = ("name", "recipe", "islands", "size", "parameters", "seeds_paired", "gap_pct_mean",
            "gap_pct_ci90", "tost", "bytes_sent", "ddp_bytes", "dp_bytes_per_byte_sent",
            "baseline_cell")  # fmt: skip
    return {k: c.get(k) for k in keys}


def summary(cells: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The decisive M = 8 cell (most paired seeds, then lowest gap), its recipe at every M
    and size, and the literature's 35M gaps beside them."""
    scored = [c for c in cells.values() if "gap_pct_mean" in c]
    m8 = [c for c in scored if c["islands"] == 8 and c["size"] == "s"]
    planned = [c for c in m8 if not c["exploratory"]]  # the headline is a planned cell
    if not planned:
        return {}
    best = min(planned, key=lambda c: (-c["seeds_paired"], c["gap_pct_mean"]))
    same = [c for c in scored if c["recipe"] == best["recipe"]]
    return {
        "best_m8": _brief(best),
        "recipe_by_m_and_size": [
            _brief(c) for c in sorted(same, key=lambda c: (c["size"], c["islands"]))
        ],
        "literature_35m_gap_pct": LITERATURE_35M_PCT,
        "default_recipe_cell": DEFAULT_RECIPE_CELL,
        "product_recipe": _brief(cells[PRODUCT_RECIPE_CELL])
        if PRODUCT_RECIPE_CELL in cells and "gap_pct_mean" in cells[PRODUCT_RECIPE_CELL]
        else None,
        "against_default": against_default(cells),
        "seed0_m8_ranking": [
            {"name": c["name"], "gap_pct_seed0": c["gap_pct"][c["seeds"].index(0)]}
            for c in sorted(m8, key=lambda c: c["gap_pct"][c["seeds"].index(0)])
            if 0 in c["seeds"]
        ],
    }


def benchmarks_section(doc: dict[str, Any]) -> list[str]:
    """The short parity table of docs/BENCHMARKS.md, from the combined result."""
    rows = doc.get("summary", {}).get("recipe_by_m_and_size", [])
    out = [
        f"Recipe `{doc['summary']['best_m8']['recipe']}` against the tuned data-parallel arm"
        f" (commit {', '.join(c[:12] for c in doc.get('commits', []))}; docs/parity.md).\n",
        "| M | size | parameters | seeds | gap % [90 % CI] | TOST ±0.5 % | literature, 35M |"
        " data-parallel bytes per byte sent |",
        "|---:|---|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        ci = r["gap_pct_ci90"]
        gap = f"{r['gap_pct_mean']:+.2f}" + ("" if ci is None else f" [{ci[0]:+.2f}, {ci[1]:+.2f}]")
        ratio = r["dp_bytes_per_byte_sent"]
        out.append(
            f"| {r['islands']} | {r['size']} | {r['parameters']:,} | {r['seeds_paired']} |"
            f" {gap} | {r['tost']} |"
            f" +{LITERATURE_35M_PCT.get(r['islands'], float('nan'))} % |"
            f" {'—' if not ratio else f'{ratio:,.0f}'} |"
        )
    beats = [r for r in doc["summary"].get("against_default", []) if r["verdict"] == "beats"]
    if beats:
        listed = "; ".join(
            f"`{r['recipe']}` {r['gap_pct_mean']:+.2f} % [{r['gap_pct_ci90'][0]:+.2f},"
            f" {r['gap_pct_ci90'][1]:+.2f}] ({r['seeds_paired']} seeds)"
            for r in beats
        )
        out.append(
            f"\nAgainst the earlier default recipe (`{doc['summary']['default_recipe_cell']}`),"
            f" paired by seed, held-out loss: {listed}."
        )
    product = doc["summary"].get("product_recipe")
    if product:
        ci = product["gap_pct_ci90"]
        out.append(
            f"\nNew runs (`hypertrain run init`, the devnet) use `{product['recipe']}`"
            f" (exploratory cell `{product['name']}`): {product['gap_pct_mean']:+.2f} %"
            f" [{ci[0]:+.2f}, {ci[1]:+.2f}] against data-parallel ({product['seeds_paired']}"
            f" seeds, {product['tost']}), {product['dp_bytes_per_byte_sent']:,.0f} times fewer"
            ' bytes than data-parallel, warm start included (docs/parity.md, "The product'
            ' default").'
        )
    return out
