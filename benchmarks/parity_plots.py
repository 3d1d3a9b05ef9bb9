"""Combine the parity grid's task files, recompute the verdicts, draw the plots.

Run: ``python benchmarks/parity_plots.py [GRID_DIR] --out COMBINED.json``
(default: ``benchmarks/results/parity/grid/`` into ``.../parity-combined.json``);
``--tuning``: the rate sweeps of ``parity_tuning.py`` (``results/parity/tuning/``) into
``parity-tuning.json``, with each arm's best rate over the seeds all its rates share (so
a partial sweep names no rate for having run more seeds) and the paired gaps, no plots.
A task file whose harness or trainer hashes differ from the files now is refused
(:class:`StaleResultError`): a figure is drawn only by the code that measured it.
Writes the combined JSON, ``docs/parity-gap-m.png`` (gap vs M),
``docs/parity-gap-size.png`` (gap vs model size, beside the literature's gaps),
``docs/parity-gap-bytes.png`` (gap vs bytes) and prints the Markdown table of
docs/parity.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]

from parity_stats import combine, paired_gap, stale_files, summary  # noqa: E402

DOCS = HERE.parent / "docs"
GRID = HERE / "results" / "parity" / "grid"
# Scaling Laws for DiLoCo (2025), Table 4: gap to data-parallel at 35M parameters, by M
LITERATURE_35M = {2: 0.7, 4: 2.0, 8: 3.9}
LITERATURE_M8 = {35e6: 3.9, 335e6: 2.0, 2.4e9: 1.1}


class StaleResultError(ValueError):
    """A result was measured by other harness or trainer files than the ones here."""


def load_tasks(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the first file's header, every task record), refusing stale or mixed files."""
    paths = sorted(folder.glob("*--seed*.json"))
    if not paths:
        raise StaleResultError(f"no task files in {folder}")
    docs = [json.loads(p.read_text()) for p in paths]
    for p, d in zip(paths, docs, strict=True):
        stale = stale_files(d)
        if stale:
            raise StaleResultError(f"{p.name}: {', '.join(stale)} changed since it was measured")
    head = {k: v for k, v in docs[0].items() if k not in ("task", "measured_at")}
    head["commits"] = sorted({d["commit"] for d in docs})
    return head, [d["task"] for d in docs]


def _errorbar(ax: Any, x: float, c: dict[str, Any], label: str | None = None) -> None:
    mean, ci = c["gap_pct_mean"], c["gap_pct_ci90"]
    yerr = None if ci is None else [[mean - ci[0]], [ci[1] - mean]]
    ax.errorbar([x], [mean], yerr=yerr, fmt="o", capsize=3, label=label)


def _decorate(ax: Any, xlabel: str) -> None:
    ax.axhspan(-0.5, 0.5, color="green", alpha=0.15, label="±0.5 % margin")
    ax.axhline(0, color="black", lw=0.5)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("gap to tuned data-parallel, %\n(90 % CI where ≥ 2 seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def plot_gap_vs_m(cells: dict[str, dict[str, Any]], recipe: str, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for c in cells.values():
        if c.get("recipe") == recipe and c["size"] == "s" and "gap_pct_mean" in c:
            _errorbar(ax, c["islands"], c)
    ax.plot(list(LITERATURE_35M), list(LITERATURE_35M.values()), "k--", label="35M (literature)")
    ax.set_xscale("log", base=2)
    _decorate(ax, f"islands M (size s, {recipe})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_gap_vs_size(cells: dict[str, dict[str, Any]], recipe: str, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for c in cells.values():
        if c.get("recipe") == recipe and c["islands"] == 8 and "gap_pct_mean" in c:
            _errorbar(ax, c["parameters"], c, f"size {c['size']}")
    ax.plot(list(LITERATURE_M8), list(LITERATURE_M8.values()), "k--", label="M = 8, literature")
    ax.set_xscale("log")
    _decorate(ax, f"parameters (M = 8, {recipe})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_gap_vs_bytes(cells: dict[str, dict[str, Any]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for c in cells.values():
        if "gap_pct_mean" not in c or c["islands"] != 8 or c["size"] != "s":
            continue
        _errorbar(ax, c["bytes_sent"], c)
        ax.annotate(c["recipe"], (c["bytes_sent"], c["gap_pct_mean"]), fontsize=6)
    dp = [c["bytes_sent"] for c in cells.values() if c["kind"] == "dp" and c["islands"] == 8]
    for x in dp[:1]:
        ax.axvline(x, color="grey", ls=":", label="data-parallel bytes")
    ax.set_xscale("log")
    _decorate(ax, "bytes sent (M = 8, size s; log)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("grid", nargs="?", type=Path, default=GRID, help="folder of task files")
    ap.add_argument("--out", type=Path, default=GRID.parent / "parity-combined.json")
    ap.add_argument("--plots", type=Path, default=DOCS, help="folder for the PNG plots")
    ap.add_argument("--tuning", action="store_true", help="the rate sweeps (parity_tuning.py)")
    args = ap.parse_args(argv)
    if args.tuning:
        return tuning_main(GRID.parent / "tuning", GRID.parent / "parity-tuning.json")
    try:
        head, tasks = load_tasks(args.grid)
    except StaleResultError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    cells = combine(tasks)
    doc = {**head, "cells": cells, "summary": summary(cells)}
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    recipe = doc["summary"].get("best_m8", {}).get("recipe", "")
    plot_gap_vs_m(cells, recipe, args.plots / "parity-gap-m.png")
    plot_gap_vs_size(cells, recipe, args.plots / "parity-gap-size.png")
    plot_gap_vs_bytes(cells, args.plots / "parity-gap-bytes.png")
    print(table(cells))
    print()
    print(default_table(doc["summary"].get("against_default", [])))
    print(json.dumps(doc["summary"], indent=1))
    return 0


def _bytes(n: float | None) -> str:
    if n is None:
        return "—"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000:
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} PB"


def table(cells: dict[str, dict[str, Any]]) -> str:
    """The Markdown table of every cell: loss, paired gap, verdict, bytes, wall time."""
    lines = [
        "| cell | M | size | seeds | held-out loss (mean ± sd) | gap % [90 % CI] | TOST ±0.5 % |"
        " bytes sent | data-parallel bytes per byte sent | wall s per seed |",
        "|---|---:|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    order = sorted(
        cells.values(), key=lambda c: (c["size"], c["islands"], c["kind"] != "dp", c["name"])
    )
    for c in order:
        gap, verdict = "—", "—"
        if "gap_pct_mean" in c:
            ci = c["gap_pct_ci90"]
            gap = f"{c['gap_pct_mean']:+.2f}" + (
                "" if ci is None else f" [{ci[0]:+.2f}, {ci[1]:+.2f}]"
            )
            verdict = c["tost"]
        ratio = c.get("dp_bytes_per_byte_sent")
        wall = sum(c["wall_seconds"]) / len(c["wall_seconds"])
        lines.append(
            f"| {c['name']}{' (exploratory)' if c['exploratory'] else ''} | {c['islands']} |"
            f" {c['size']} | {len(c['seeds'])} |"
            f" {c['final_loss_mean']:.4f} ± {c['final_loss_sd']:.4f}"
            f" | {gap} | {verdict} | {_bytes(c['bytes_sent'])} |"
            f" {'—' if not ratio else f'{ratio:,.0f}'} | {wall:.0f} |"
        )
    return "\n".join(lines)


def default_table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of M = 8 cells against the earlier default recipe's cell."""
    lines = [
        "| cell | seeds paired | loss vs default recipe, % [90 % CI] | verdict |"
        " data-parallel bytes per byte sent |",
        "|---|---:|---:|---|---:|",
    ]
    for r in rows:
        ci = r["gap_pct_ci90"]
        gap = f"{r['gap_pct_mean']:+.2f}" + ("" if ci is None else f" [{ci[0]:+.2f}, {ci[1]:+.2f}]")
        ratio = r["dp_bytes_per_byte_sent"]
        lines.append(
            f"| {r['name']}{' (exploratory seeds)' if r['exploratory'] else ''} |"
            f" {r['seeds_paired']} | {gap} | {r['verdict']} |"
            f" {'—' if not ratio else f'{ratio:,.0f}'} |"
        )
    return "\n".join(lines)


ARMS = (("dp", "data-parallel"), ("product", "recipe, AdamW"), ("muon", "recipe, Muon"))


def _sweep_rows(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = ("name", "lr", "muon_lr", "seeds", "final_loss")
    return [
        {**{k: c.get(k) for k in keys}, "mean": c["final_loss_mean"], "sd": c["final_loss_sd"]}
        for c in sorted(cells, key=lambda c: (c.get("muon_lr") or 0, c["lr"]))
    ]


def sweep_best(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The rate of lowest mean loss over the seeds every rate of the sweep has."""
    common = set.intersection(*(set(r["seeds"]) for r in rows)) if rows else set()
    if not common:
        return None

    def mean(r: dict[str, Any]) -> float:
        pairs = zip(r["seeds"], r["final_loss"], strict=True)
        return sum(v for s, v in pairs if s in common) / len(common)

    top = min(rows, key=mean)
    return {"name": top["name"], "on_seeds": sorted(common), "mean": mean(top)}


def tuning_summary(cells: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each arm's rates (mean ± sd over seeds), its best, data-parallel's seed spread, and
    the best cells' paired gaps (``parity_stats.paired_gap``: 90 % interval, TOST)."""
    diloco = [c for c in cells.values() if c["kind"] == "diloco"]
    out: dict[str, Any] = {
        "dp": _sweep_rows([c for c in cells.values() if c["kind"] == "dp"]),
        "product": _sweep_rows([c for c in diloco if c["optimizer"] == "adamw"]),
        "muon": _sweep_rows([c for c in diloco if c["optimizer"] == "muon"]),
    }
    best = {key: sweep_best(out[key]) for key, _ in ARMS}
    out["best"] = best
    out["dp_seed_sd_pct_of_mean"] = {
        r["name"]: 100 * r["sd"] / r["mean"] for r in out["dp"] if len(r["seeds"]) > 1
    }
    pairs = {"product_vs_dp": ("product", "dp"), "muon_vs_dp": ("muon", "dp")}
    pairs["muon_vs_product"] = ("muon", "product")
    for key, (a, b) in pairs.items():
        if best[a] and best[b]:
            gap = paired_gap(cells[best[a]["name"]], cells[best[b]["name"]])
            out[key] = {"cell": best[a]["name"], "against": best[b]["name"], **(gap or {})}
    return out


def tuning_table(summary: dict[str, Any]) -> str:
    """The Markdown table of every swept rate, each arm's best in bold."""
    lines = [
        "| arm | rate | seeds | held-out loss per seed | mean ± sd |",
        "|---|---:|---:|---|---:|",
    ]
    for key, label in ARMS:
        win = (summary["best"][key] or {}).get("name")
        for r in summary[key]:
            rate = f"{r['lr']:g}" if key != "muon" else f"muon {r['muon_lr']:g}, AdamW {r['lr']:g}"
            mean = f"{r['mean']:.4f} ± {r['sd']:.4f}"
            lines.append(
                f"| {label} | {rate} | {len(r['seeds'])} |"
                f" {', '.join(f'{v:.4f}' for v in r['final_loss'])} |"
                f" {f'**{mean}**' if r['name'] == win else mean} |"
            )
    return "\n".join(lines)


def tuning_main(folder: Path, out: Path) -> int:
    try:
        head, tasks = load_tasks(folder)
    except StaleResultError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    cells = combine(tasks)  # a cell keeps its first task's fields, muon_lr among them
    tuning = tuning_summary(cells)
    out.write_text(json.dumps({**head, "cells": cells, "tuning": tuning}, indent=1) + "\n")
    print(tuning_table(tuning))
    print(json.dumps({k: v for k, v in tuning.items() if k not in dict(ARMS)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
