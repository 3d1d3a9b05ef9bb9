"""Quality-parity experiment: DiLoCo rounds against data-parallel training at equal tokens.

Runs a pre-registered grid (docs/parity.md states it before the results) on real text
from the repository (tests/assets/tinyshakespeare.txt, tokenized with a byte-level BPE
trained by ``hypertrain.data.tokenizer``), on CPU, several seeds per cell, and writes
one JSON file with per-cell held-out loss, the paired gap to the data-parallel baseline
with a 90% confidence interval, the TOST equivalence verdict at a 0.5% margin and the
bytes each cell moves. Plots are rendered by ``benchmarks/parity_plots.py``.

Run:
    python benchmarks/parity.py --quick                 # 3 cells, tiny model, seconds
    python benchmarks/parity.py                         # the full grid (hours on 2 cores)
    python benchmarks/parity.py --grid core --steps 200 # the subset that fits an hour
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]

from common import machine_info  # noqa: E402
from hypertrain.data.tokenizer import tokenizer_from_bytes, train_tokenizer  # noqa: E402
from hypertrain.protocol.manifest import ModelSpec, SparseSpec  # noqa: E402
from hypertrain.protocol.traffic import ddp_bytes_per_device  # noqa: E402
from hypertrain.trainer.determinism import configure_determinism  # noqa: E402
from hypertrain.trainer.presets import param_count  # noqa: E402
from parity_sim import Cell, CellRun, Setup, run_diloco, run_dp  # noqa: E402

CORPUS = HERE.parent / "tests" / "assets" / "tinyshakespeare.txt"
OUT_DIR = HERE / "results" / "parity"
MARGIN_PCT = 0.5
HELDOUT = 128  # held-out windows scored after every round / every steps/10
# one-sided 95% Student-t quantiles (a two-sided 90% interval) by degrees of freedom
T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833}


def parity_model(vocab_size: int, quick: bool) -> ModelSpec:
    """A proxy-shaped model small enough for a grid on two cores."""
    d, layers, ffn = (32, 1, 64) if quick else (64, 2, 176)
    return ModelSpec(
        preset="parity-tiny" if quick else "parity-proxy",
        vocab_size=vocab_size,
        d_model=d,
        num_layers=layers,
        num_heads=2,
        head_dim=d // 2,
        ffn_hidden=ffn,
        context_length=64,
    )


def corpus_windows(
    vocab_size: int, seq_len: int, stride: int
) -> tuple[np.ndarray, np.ndarray, str]:
    """(train windows, held-out windows, tokenizer sha256): last 10% of the text held out."""
    tok = tokenizer_from_bytes(train_tokenizer([CORPUS], vocab_size))
    text = CORPUS.read_text(encoding="utf-8")
    ids = np.asarray(tok.encode_batch([text])[0], dtype=np.int64)
    cut = int(len(ids) * 0.9)
    train, held = ids[:cut], ids[cut:]
    starts = np.arange(0, len(train) - seq_len, stride)
    windows = np.stack([train[s : s + seq_len] for s in starts])
    held_starts = np.arange(0, len(held) - seq_len, seq_len)
    return windows, np.stack([held[s : s + seq_len] for s in held_starts]), tok.sha256


def data_order(num_windows: int, needed: int, seed: int) -> np.ndarray:
    """Seeded permutations of the windows, concatenated until ``needed`` ids."""
    rng = np.random.default_rng(seed)
    parts = [rng.permutation(num_windows) for _ in range(-(-needed // num_windows))]
    return np.concatenate(parts)[:needed]


def grid(name: str) -> list[Cell]:
    """The pre-registered cells (docs/parity.md); ``quick`` is the CI subset."""
    if name == "quick":
        return [
            Cell("dp-M2", "dp", 2),
            Cell("diloco-M2-H5-int8", "diloco", 2, 5, baseline="dp-M2"),
            Cell("diloco-M2-H5-sparse", "diloco", 2, 5, codec="sparse", baseline="dp-M2"),
        ]
    if name == "explore":  # cheaper stand-ins run when the M = 8 cells did not fit
        return [
            Cell("diloco-M2-H25-sparse", "diloco", 2, 25, codec="sparse", baseline="dp-M2"),
            Cell("diloco-M2-H25-reset", "diloco", 2, 25, policy="reset", baseline="dp-M2"),
            Cell("diloco-M1-H25-avg", "diloco", 1, 25, 1.0, 0.0, baseline="dp-M1"),
            Cell("diloco-M8-H25-avg", "diloco", 8, 25, 1.0, 0.0, baseline="dp-M8"),
            Cell("diloco-M8-H100-avg", "diloco", 8, 100, 1.0, 0.0, baseline="dp-M8"),
            Cell("diloco-M8-H25-reset-avg", "diloco", 8, 25, 1.0, 0.0, "reset", baseline="dp-M8"),
            Cell(
                "diloco-M8-H25-sparse-avg",
                "diloco",
                8,
                25,
                1.0,
                0.0,
                codec="sparse",
                baseline="dp-M8",
            ),
        ]
    cells = [Cell(f"dp-M{m}", "dp", m) for m in (1, 2, 4, 8)]
    cells += [Cell(f"diloco-M{m}-H25", "diloco", m, 25, baseline=f"dp-M{m}") for m in (1, 2, 4, 8)]
    cells += [
        Cell("diloco-M8-H100", "diloco", 8, 100, baseline="dp-M8"),
        Cell("diloco-M8-H25-reset", "diloco", 8, 25, policy="reset", baseline="dp-M8"),
        Cell("diloco-M8-H25-sparse", "diloco", 8, 25, codec="sparse", baseline="dp-M8"),
        Cell("diloco-M8-H100-sparse", "diloco", 8, 100, codec="sparse", baseline="dp-M8"),
        Cell("diloco-M8-H25-lr0.9", "diloco", 8, 25, outer_lr=0.9, baseline="dp-M8"),
        Cell("dp-M8-muon", "dp", 8, optimizer="muon"),
        Cell("diloco-M8-H25-muon", "diloco", 8, 25, optimizer="muon", baseline="dp-M8-muon"),
    ]
    if name == "full":
        cells += [Cell("dp-M16", "dp", 16)]
        cells += [Cell(f"diloco-M16-H{h}", "diloco", 16, h, baseline="dp-M16") for h in (25, 100)]
        cells += [Cell("diloco-M8-H500-sparse", "diloco", 8, 500, codec="sparse", baseline="dp-M8")]
    return cells


def gap_stats(gaps: list[float]) -> dict[str, Any]:
    """Mean paired gap (%), its 90% CI (Student t), TOST and non-inferiority at the margin."""
    n = len(gaps)
    mean = statistics.fmean(gaps)
    sd = statistics.stdev(gaps) if n > 1 else math.inf
    half = T95.get(n - 1, 1.645) * sd / math.sqrt(n) if n > 1 else math.inf
    lo, hi = mean - half, mean + half
    return {
        "gap_pct_mean": mean,
        "gap_pct_sd": sd,
        "gap_pct_ci90": [lo, hi],
        "equivalent": bool(lo > -MARGIN_PCT and hi < MARGIN_PCT),  # TOST at +-0.5%
        "non_inferior": bool(hi < MARGIN_PCT),  # the upper one-sided test alone
    }


def traffic(cell: Cell, setup: Setup, run: CellRun, tokens: int) -> dict[str, Any]:
    """Bytes of the cell, and the data-parallel ring all-reduce cost for the same tokens."""
    p = param_count(setup.model)
    ddp_total = cell.islands * ddp_bytes_per_device(p, cell.islands, setup.steps)
    if cell.kind == "dp":
        return {"bytes_sent": ddp_total, "ddp_bytes": ddp_total, "tokens": tokens}
    return {
        "bytes_sent": run.update_bytes,
        "model_download_bytes": run.model_download_bytes,
        "checkpoint_bytes": run.checkpoint_bytes,
        "ddp_bytes": ddp_total,
        "saved_vs_ddp_updates": ddp_total / run.update_bytes if run.update_bytes else None,
        "saved_vs_ddp_with_download": ddp_total / (run.update_bytes + run.model_download_bytes),
        "tokens": tokens,
    }


def run_cell(cell: Cell, setup: Setup, data: dict[str, Any], seeds: list[int]) -> dict[str, Any]:
    runner: Callable[..., CellRun] = run_dp if cell.kind == "dp" else run_diloco
    needed = setup.steps * cell.islands * setup.batch_per_island
    runs, curves, started = [], [], time.monotonic()
    for seed in seeds:
        order = data_order(len(data["windows"]), needed, seed)
        run = runner(cell, setup, data["windows"], data["heldout"], order, seed)
        runs.append(run)
        curves.append(run.losses)
    tokens = needed * (setup.seq_len - 1)
    finals = [r.losses[-1][1] for r in runs]
    return {
        **asdict(cell),
        "seeds": seeds,
        "final_loss": finals,
        "final_loss_mean": statistics.fmean(finals),
        "final_loss_sd": statistics.stdev(finals) if len(finals) > 1 else 0.0,
        "curves": curves,
        "rounds": runs[0].rounds,
        "seconds": time.monotonic() - started,
        **traffic(cell, setup, runs[0], tokens),
    }


def add_gaps(results: dict[str, dict[str, Any]]) -> None:
    for cell in results.values():
        base = results.get(cell["baseline"]) if cell["baseline"] else None
        if base is None:
            continue
        gaps = [
            100.0 * (a - b) / b for a, b in zip(cell["final_loss"], base["final_loss"], strict=True)
        ]
        cell.update({"gap_pct": gaps, **gap_stats(gaps)})


def setup_for(args: argparse.Namespace, vocab: int) -> Setup:
    quick = args.grid == "quick"  # "explore" uses the core setup, so its cells combine
    return Setup(
        model=parity_model(vocab, quick),
        seq_len=args.seq_len,
        batch_per_island=args.batch,
        steps=args.steps,
        lr=args.lr,
        warmup_steps=max(1, args.steps // 20),
        muon_lr=0.02,
        sparse=SparseSpec(chunk_size=args.chunk, topk_per_chunk=args.topk, value_bits=args.bits),
        eval_every=max(1, args.steps // 10),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the 3-cell CI subset (tiny model)")
    ap.add_argument(
        "--grid", choices=["quick", "core", "full", "explore"], default="full", help="cell set"
    )
    ap.add_argument("--steps", type=int, default=500, help="inner steps per island (= DP steps)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per cell (>= 3 for a verdict)")
    ap.add_argument("--batch", type=int, default=4, help="samples per island step")
    ap.add_argument("--seq-len", type=int, default=33, help="tokens per sample")
    ap.add_argument("--lr", type=float, default=3e-3, help="inner AdamW peak learning rate")
    ap.add_argument("--vocab", type=int, default=512, help="BPE vocabulary size")
    ap.add_argument("--chunk", type=int, default=4096, help="sparse chunk size")
    ap.add_argument("--topk", type=int, default=64, help="sparse entries kept per chunk")
    ap.add_argument("--bits", type=int, default=2, help="sparse bits per value")
    ap.add_argument("--only", nargs="*", default=None, help="run only these cell names")
    ap.add_argument("--out", type=Path, default=None, help="result JSON path")
    args = ap.parse_args(argv)
    if args.quick:
        args.grid, args.steps, args.seeds, args.vocab, args.chunk, args.topk = (
            "quick", 20, 3, 300, 256, 16,
        )  # fmt: skip
    configure_determinism(1)
    torch.manual_seed(0)
    windows, heldout, tok_sha = corpus_windows(args.vocab, args.seq_len, stride=16)
    data = {"windows": windows, "heldout": torch.from_numpy(heldout[:HELDOUT])}
    setup = setup_for(args, args.vocab)
    cells = [c for c in grid(args.grid) if not args.only or c.name in args.only]
    bad = [c.name for c in cells if c.kind == "diloco" and args.steps % c.inner_steps]
    if bad:
        ap.error(f"--steps {args.steps} is not a multiple of H for {bad}")
    out_path = args.out or OUT_DIR / f"parity-{args.grid}.json"
    doc = header(args, setup, tok_sha, len(windows))
    for cell in cells:
        doc["cells"][cell.name] = run_cell(cell, setup, data, list(range(args.seeds)))
        add_gaps(doc["cells"])
        write(out_path, doc)
        print(f"{cell.name}: {summary_line(doc['cells'][cell.name])}", flush=True)
    doc["best"] = best_cells(doc["cells"])
    write(out_path, doc)
    return 0


def header(args: argparse.Namespace, setup: Setup, tok_sha: str, windows: int) -> dict[str, Any]:
    return {
        "grid": args.grid,
        "margin_pct": MARGIN_PCT,
        "setup": {
            **{k: v for k, v in asdict(setup).items() if k not in ("model", "sparse")},
            "model": setup.model.model_dump(mode="json"),
            "parameters": param_count(setup.model),
            "sparse": setup.sparse.model_dump(mode="json"),
            "corpus": "tests/assets/tinyshakespeare.txt",
            "tokenizer_sha256": tok_sha,
            "train_windows": windows,
            "heldout_samples": HELDOUT,
        },
        "machine": machine_info(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cells": {},
    }


def summary_line(c: dict[str, Any]) -> str:
    line = f"loss {c['final_loss_mean']:.4f} +- {c['final_loss_sd']:.4f} ({c['seconds']:.0f} s)"
    if "gap_pct_mean" in c:
        lo, hi = c["gap_pct_ci90"]
        line += f", gap {c['gap_pct_mean']:+.2f}% [{lo:+.2f}, {hi:+.2f}]"
    return line


def best_cells(cells: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Best DiLoCo cell at M = 8 by gap, and the largest byte saving at gap <= margin."""
    scored = [c for c in cells.values() if "gap_pct_mean" in c]
    m8 = [c for c in scored if c["islands"] == 8]
    out: dict[str, Any] = {}
    if m8:
        best = min(m8, key=lambda c: c["gap_pct_ci90"][1])
        out["m8_parity"] = {
            "cell": best["name"],
            "gap_pct_mean": best["gap_pct_mean"],
            "gap_pct_ci90": best["gap_pct_ci90"],
            "distance_to_target_pct": max(0.0, best["gap_pct_ci90"][1] - MARGIN_PCT),
        }
    within = [
        c for c in scored if c["gap_pct_ci90"][1] < MARGIN_PCT and c.get("saved_vs_ddp_updates")
    ]
    pool = within or [c for c in scored if c.get("saved_vs_ddp_updates")]
    if pool:
        top = max(pool, key=lambda c: c["saved_vs_ddp_updates"])
        out["traffic"] = {
            "cell": top["name"],
            "within_margin": bool(within),
            "saved_vs_ddp_updates": top["saved_vs_ddp_updates"],
            "saved_vs_ddp_with_download": top["saved_vs_ddp_with_download"],
            "gap_pct_ci90": top["gap_pct_ci90"],
            "target": 10_000,
        }
    return out


def write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
