"""Combine parity result files, recompute the verdicts, draw the plots, print the table.

Run: ``python benchmarks/parity_plots.py PART.json [PART.json ...] --out COMBINED.json``
(parts are runs of ``benchmarks/parity.py`` over disjoint cells of one grid and setup).
Writes COMBINED.json, ``docs/parity-curves.png``, ``docs/parity-gap.png`` and prints
the Markdown results table that docs/parity.md carries.
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

from parity import add_gaps, best_cells  # noqa: E402

DOCS = HERE.parent / "docs"


def combine(paths: list[Path]) -> dict[str, Any]:
    docs = [json.loads(p.read_text()) for p in paths]
    out = {k: v for k, v in docs[0].items() if k != "cells"}
    for other in docs[1:]:
        if other["setup"] != docs[0]["setup"]:
            raise SystemExit(f"setups differ between {paths[0].name} and another part")
    out["parts"] = [p.name for p in paths]
    out["cells"] = {}
    for d in docs:
        for name, cell in d["cells"].items():
            cell.pop("gap_pct", None)
            out["cells"][name] = cell
    add_gaps(out["cells"])
    out["best"] = best_cells(out["cells"])
    return out


def _fmt_bytes(n: float | None) -> str:
    if n is None:
        return "—"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000:
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} PB"


def table(doc: dict[str, Any]) -> str:
    head = (
        "| cell | M | H | inner | policy | codec | outer lr / mom | held-out loss (mean ± sd) |"
        " gap % [90% CI] | TOST ±0.5% | bytes sent | DP bytes | DP / sent |"
    )
    lines = [head, "|---|---:|---:|---|---|---|---:|---:|---:|---|---:|---:|---:|"]
    cells = sorted(doc["cells"].values(), key=lambda c: (c["islands"], c["kind"] != "dp"))
    for c in cells:
        dp = c["kind"] == "dp"
        gap = "baseline"
        if "gap_pct_mean" in c:
            lo, hi = c["gap_pct_ci90"]
            gap = f"{c['gap_pct_mean']:+.2f} [{lo:+.2f}, {hi:+.2f}]"
        verdict = "—" if dp else "not shown"
        if c.get("equivalent") or c.get("non_inferior"):
            verdict = "equivalent" if c.get("equivalent") else "non-inferior"
        ratio = c.get("saved_vs_ddp_updates")
        outer = "—" if dp else f"{c['outer_lr']} / {c['outer_momentum']}"
        lines.append(
            f"| {c['name']} | {c['islands']} | {'—' if dp else c['inner_steps']} |"
            f" {c['optimizer']} | {'—' if dp else c['policy']} |"
            f" {'bf16 grads' if dp else c['codec']} |"
            f" {outer} |"
            f" {c['final_loss_mean']:.4f} ± {c['final_loss_sd']:.4f} | {gap} | {verdict} |"
            f" {_fmt_bytes(c['bytes_sent'])} | {_fmt_bytes(c['ddp_bytes'])} |"
            f" {'—' if not ratio else f'{ratio:,.0f}×'} |"
        )
    return "\n".join(lines)


def plot_curves(doc: dict[str, Any], path: Path) -> None:
    groups = sorted({c["islands"] for c in doc["cells"].values()})
    fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 3.6), sharey=True)
    for ax, m in zip(axes if len(groups) > 1 else [axes], groups, strict=True):
        for c in doc["cells"].values():
            if c["islands"] != m:
                continue
            n = min(len(curve) for curve in c["curves"])
            steps = [p[0] for p in c["curves"][0][:n]]
            mean = [sum(curve[i][1] for curve in c["curves"]) / len(c["curves"]) for i in range(n)]
            style = "-" if c["kind"] == "dp" else "--"
            ax.plot(steps, mean, style, marker="." if n < 12 else None, label=c["name"])
        ax.set_title(f"M = {m}")
        ax.set_xlabel("inner steps per island (equal tokens)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    (axes[0] if len(groups) > 1 else axes).set_ylabel("held-out loss (mean of seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_gaps(doc: dict[str, Any], path: Path) -> None:
    scored = [c for c in doc["cells"].values() if "gap_pct_mean" in c]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    h25 = sorted(
        (c for c in scored if c["inner_steps"] == 25 and c["name"].count("-") == 2),
        key=lambda c: c["islands"],
    )
    for ax_cells, ax, x_of, xlabel in (
        (h25, left, lambda c: c["islands"], "islands M (H = 25, AdamW, int8, carry)"),
        (scored, right, lambda c: c["saved_vs_ddp_updates"], "DP bytes / bytes sent (log)"),
    ):
        for c in ax_cells:
            lo, hi = c["gap_pct_ci90"]
            mean = c["gap_pct_mean"]
            ax.errorbar([x_of(c)], [mean], yerr=[[mean - lo], [hi - mean]], fmt="o", capsize=3)
            if ax is right:
                ax.annotate(c["name"].removeprefix("diloco-"), (x_of(c), mean), fontsize=6)
        ax.axhspan(-0.5, 0.5, color="green", alpha=0.15, label="±0.5% margin")
        ax.axhline(0, color="black", lw=0.5)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("gap to data-parallel, % (90% CI)")
        ax.grid(alpha=0.3)
    right.set_xscale("log")
    left.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("parts", nargs="+", type=Path, help="result files of benchmarks/parity.py")
    ap.add_argument("--out", type=Path, required=True, help="combined result JSON")
    ap.add_argument("--plots", type=Path, default=DOCS, help="folder for the PNG plots")
    args = ap.parse_args()
    doc = combine(args.parts)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    plot_curves(doc, args.plots / "parity-curves.png")
    plot_gaps(doc, args.plots / "parity-gap.png")
    print(table(doc))
    print(json.dumps(doc["best"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
