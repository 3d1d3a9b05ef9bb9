"""Quality-parity experiment: DiLoCo rounds against data-parallel training at equal tokens.

Runs the pre-registered grid (``parity_grid.py``; docs/parity.md states it before the
results) on real text from the repository (tests/assets/tinyshakespeare.txt, tokenized
with a byte-level BPE trained by ``hypertrain.data.tokenizer``), on CPU. Each finished
``(cell, seed)`` is written at once to its own JSON file (so a stopped run keeps what it
finished), with its wall time, the git commit and the hashes of the harness and trainer
files (``parity_stats.provenance``). ``parity_plots.py`` combines them, recomputes the
paired gaps and refuses files whose harness or trainer changed since.

Run:
    python benchmarks/parity.py --quick           # identity checks + 3 tiny cells (CI)
    python benchmarks/parity.py --grid preregistered --workers 2
    python benchmarks/parity.py --cell NAME --seed 5 --exploratory   # one added task
    python benchmarks/parity.py --known-answer    # the frozen data-parallel curve (JSON)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "src"), str(ROOT)]

from tests.known_answers import PROFILE  # noqa: E402  (no torch import)


def _pin_profile() -> None:
    """Re-execute under the pinned CPU profile (set before torch loads) unless it is on."""
    if all(os.environ.get(k) == v for k, v in PROFILE.items()):
        return
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **PROFILE})


if __name__ == "__main__" and {"--quick", "--known-answer"} & set(sys.argv):
    _pin_profile()

import numpy as np  # noqa: E402
import torch  # noqa: E402

from common import machine_info  # noqa: E402
from hypertrain.data.tokenizer import tokenizer_from_bytes, train_tokenizer  # noqa: E402
from hypertrain.protocol.manifest import ModelSpec, SparseSpec  # noqa: E402
from hypertrain.trainer.determinism import configure_determinism  # noqa: E402
from hypertrain.trainer.presets import param_count  # noqa: E402
from parity_grid import plan  # noqa: E402
from parity_identity import identity_checks, known_answer_curve  # noqa: E402
from parity_sim import Cell, CellRun, Data, Setup, dp_bytes, run_diloco, run_dp  # noqa: E402
from parity_stats import provenance  # noqa: E402

CORPUS = ROOT / "tests" / "assets" / "tinyshakespeare.txt"
OUT_DIR = HERE / "results" / "parity"
SIZES = {  # name -> (d_model, layers, ffn_hidden)
    "xs": (32, 1, 64),  # the quick grid and the identity tests
    "s": (64, 2, 176),  # ~0.13M parameters at vocab 512
    "m": (128, 2, 352),  # ~0.47M parameters at vocab 512
}


def parity_model(vocab_size: int, size: str, context: int) -> ModelSpec:
    d, layers, ffn = SIZES[size]
    return ModelSpec(
        preset=f"parity-{size}",
        vocab_size=vocab_size,
        d_model=d,
        num_layers=layers,
        num_heads=2,
        head_dim=d // 2,
        ffn_hidden=ffn,
        context_length=context,
    )


def corpus_windows(
    vocab_size: int, seq_len: int, stride: int, heldout_windows: int
) -> tuple[np.ndarray, np.ndarray, str]:
    """(train windows, held-out windows, tokenizer sha256): the text's last
    ``heldout_windows * seq_len`` tokens are held out, in disjoint windows."""
    tok = tokenizer_from_bytes(train_tokenizer([CORPUS], vocab_size))
    ids = np.asarray(tok.encode_batch([CORPUS.read_text(encoding="utf-8")])[0], dtype=np.int64)
    cut = len(ids) - heldout_windows * seq_len
    if cut < len(ids) // 2:
        raise SystemExit(f"held-out set of {heldout_windows} windows is over half the corpus")
    train, held = ids[:cut], ids[cut:]
    starts = np.arange(0, len(train) - seq_len, stride)
    windows = np.stack([train[s : s + seq_len] for s in starts])
    return windows, held.reshape(heldout_windows, seq_len), tok.sha256


def data_order(num_windows: int, needed: int, seed: int) -> np.ndarray:
    """Seeded permutations of the windows, concatenated until ``needed`` ids."""
    rng = np.random.default_rng(seed)
    parts = [rng.permutation(num_windows) for _ in range(-(-needed // num_windows))]
    return np.concatenate(parts)[:needed]


def setups(args: argparse.Namespace, vocab: int) -> dict[str, Setup]:
    """One setup per model size; everything else is shared by the whole grid."""
    sizes = ["xs"] if args.grid == "quick" else ["s", "m"]
    return {
        size: Setup(
            model=parity_model(vocab, size, args.seq_len),
            seq_len=args.seq_len,
            batch_per_island=args.batch,
            steps=args.steps,
            lr=args.lr,
            warmup_steps=max(1, args.steps // 20),
            muon_lr=0.02,
            sparse=SparseSpec(chunk_size=args.chunk, topk_per_chunk=args.topk, value_bits=2),
            eval_every=args.eval_every,
        )
        for size in sizes
    }


def traffic(cell: Cell, setup: Setup, run: CellRun) -> dict[str, Any]:
    """Bytes the cell moves, and what data-parallel training of the same tokens sends."""
    ddp_total = dp_bytes(param_count(setup.model), cell.islands, setup.steps)
    if cell.kind == "dp":
        return {"bytes_sent": ddp_total, "ddp_bytes": ddp_total}
    sent = run.update_bytes + run.warm_start_bytes
    return {
        "bytes_sent": sent,
        "update_bytes": run.update_bytes,
        "warm_start_bytes": run.warm_start_bytes,
        "model_download_bytes": run.model_download_bytes,
        "checkpoint_bytes": run.checkpoint_bytes,
        "ddp_bytes": ddp_total,
        "dp_bytes_per_byte_sent": ddp_total / sent if sent else None,
    }


def run_task(cell: Cell, seed: int, setup: Setup, data: dict[str, Any]) -> dict[str, Any]:
    """Train one ``(cell, seed)`` and return its result record."""
    configure_determinism(1)
    needed = setup.steps * cell.islands * setup.batch_per_island
    order = data_order(len(data["windows"]), needed, seed)
    d = Data(data["windows"], data["heldout"], order)
    started = time.monotonic()
    run = (run_dp if cell.kind == "dp" else run_diloco)(cell, setup, d, seed)
    return {
        **asdict(cell),
        "seed": seed,
        "final_loss": run.losses[-1][1],
        "curve": run.losses,
        "rounds": run.rounds,
        "final_state_sha256": run.final_state_sha256,
        "wall_seconds": time.monotonic() - started,
        "tokens": needed * (setup.seq_len - 1),
        "parameters": param_count(setup.model),
        **traffic(cell, setup, run),
    }


def header(
    args: argparse.Namespace, sets: dict[str, Setup], tok_sha: str, n: int
) -> dict[str, Any]:
    return {
        "grid": args.grid,
        "setups": {
            size: {
                **{k: v for k, v in asdict(s).items() if k not in ("model", "sparse")},
                "model": s.model.model_dump(mode="json"),
                "parameters": param_count(s.model),
                "sparse": s.sparse.model_dump(mode="json"),
            }
            for size, s in sets.items()
        },
        "corpus": "tests/assets/tinyshakespeare.txt",
        "tokenizer_sha256": tok_sha,
        "train_windows": n,
        "heldout_windows": args.heldout,
        "heldout_tokens": args.heldout * (args.seq_len - 1),
        "tokens_per_island_step": args.batch * (args.seq_len - 1),
        "machine": machine_info(),
        **provenance(),
    }


_WORKER: dict[str, Any] = {}


def _init_worker(args: argparse.Namespace) -> None:
    _WORKER.update(prepare(args))


def _worker_task(cell: Cell, seed: int) -> dict[str, Any]:
    return run_task(cell, seed, _WORKER["setups"][cell.size], _WORKER["data"])


def prepare(args: argparse.Namespace) -> dict[str, Any]:
    configure_determinism(1)
    windows, heldout, tok_sha = corpus_windows(args.vocab, args.seq_len, 32, args.heldout)
    sets = setups(args, args.vocab)
    return {
        "setups": sets,
        "data": {"windows": windows, "heldout": torch.from_numpy(heldout)},
        "header": header(args, sets, tok_sha, len(windows)),
    }


def task_path(out_dir: Path, cell: Cell, seed: int) -> Path:
    return out_dir / f"{cell.name}--seed{seed}.json"


def write_task(out_dir: Path, head: dict[str, Any], record: dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{record['name']}--seed{record['seed']}.json"
    path.write_text(json.dumps({**head, "measured_at": _now(), "task": record}, indent=1) + "\n")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def load_done(out_dir: Path) -> dict[tuple[str, int], float]:
    done: dict[tuple[str, int], float] = {}
    for p in sorted(out_dir.glob("*--seed*.json")):
        t = json.loads(p.read_text())["task"]
        done[(t["name"], t["seed"])] = t["final_loss"]
    return done


def run_grid(args: argparse.Namespace, head: dict[str, Any]) -> int:
    """Run :func:`parity_grid.plan` to completion on ``args.workers`` processes."""
    out_dir: Path = args.out_dir
    done = load_done(out_dir)
    running: dict[Future[dict[str, Any]], tuple[str, int]] = {}
    with ProcessPoolExecutor(args.workers, initializer=_init_worker, initargs=(args,)) as pool:
        while True:
            busy = set(running.values())
            ready = [t for t in plan(done) if (t[0].name, t[1]) not in set(done) | busy]
            for cell, seed in ready[: args.workers - len(running)]:
                running[pool.submit(_worker_task, cell, seed)] = (cell.name, seed)
            if not running:
                return 0
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                key = running.pop(fut)
                try:
                    record = fut.result()
                except Exception as exc:
                    print(f"{key[0]} seed {key[1]}: FAILED {exc!r}", flush=True)
                    done[key] = float("inf")
                    continue
                write_task(out_dir, head, record)
                done[key] = record["final_loss"]
                print(f"{record['name']} seed {record['seed']}: {record['final_loss']:.4f}"
                      f" ({record['wall_seconds']:.0f} s)", flush=True)  # fmt: skip


def run_one(args: argparse.Namespace, ctx: dict[str, Any]) -> int:
    """One added task (``--cell`` from the plan's names, or a DiLoCo variant of it)."""
    cells = {c.name: c for c, _ in plan(load_done(args.out_dir))}
    if args.cell not in cells:
        raise SystemExit(f"unknown or not yet planned cell {args.cell!r}")
    cell = replace(cells[args.cell], exploratory=args.exploratory)
    record = run_task(cell, args.seed, ctx["setups"][cell.size], ctx["data"])
    write_task(args.out_dir, ctx["header"], record)
    return 0


def run_quick(args: argparse.Namespace, ctx: dict[str, Any]) -> int:
    """The CI subset: the identity checks (exit 1 on a miss) and three tiny cells."""
    setup = ctx["setups"]["xs"]
    doc: dict[str, Any] = {**ctx["header"], "measured_at": _now()}
    doc["identity"] = identity_checks(setup, ctx["data"])
    doc["known_answer"] = known_answer_curve(setup, ctx["data"])
    cells = [
        Cell("dp-M2-xs", "dp", 2, size="xs"),
        Cell("diloco-M2-xs-H5-int8", "diloco", 2, 5, baseline="dp-M2-xs", size="xs"),
        Cell("diloco-M2-xs-H5-sparse", "diloco", 2, 5, codec="sparse", baseline="dp-M2-xs",
             size="xs"),
    ]  # fmt: skip
    doc["tasks"] = [run_task(c, s, setup, ctx["data"]) for c in cells for s in range(3)]
    out = args.out or OUT_DIR / "parity-quick.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    failed = [k for k, v in doc["identity"].items() if v["holds"] is False]
    print(json.dumps({k: v["holds"] for k, v in doc["identity"].items()}))
    return 1 if failed else 0


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="identity checks + 3 tiny cells (CI)")
    ap.add_argument("--known-answer", action="store_true", help="print the frozen DP curve")
    ap.add_argument("--grid", default="preregistered", help="the grid's name (in the results)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes")
    ap.add_argument("--cell", default=None, help="run only this planned cell (with --seed)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--exploratory", action="store_true", help="mark the task as added later")
    ap.add_argument("--part", default="0/1", help="K/N: only every N-th task from K (explore)")
    ap.add_argument("--steps", type=int, default=100, help="global steps (= DP steps)")
    ap.add_argument("--batch", type=int, default=16, help="windows per island step")
    ap.add_argument("--seq-len", type=int, default=65, help="tokens per window")
    ap.add_argument("--heldout", type=int, default=1600, help="held-out windows")
    ap.add_argument("--eval-every", type=int, default=50, help="held-out loss every N steps")
    ap.add_argument("--lr", type=float, default=6e-3, help="inner peak lr (a cell may set its own)")
    ap.add_argument("--vocab", type=int, default=512, help="BPE vocabulary size")
    ap.add_argument("--chunk", type=int, default=4096, help="sparse chunk size")
    ap.add_argument("--topk", type=int, default=64, help="sparse entries kept per chunk")
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR / "grid", help="per-task JSON folder")
    ap.add_argument("--out", type=Path, default=None, help="the quick run's JSON")
    args = ap.parse_args(argv)
    if args.quick or args.known_answer:
        args.grid, args.steps, args.batch, args.seq_len, args.heldout = "quick", 10, 4, 17, 64
        args.vocab, args.chunk, args.topk, args.eval_every = 300, 256, 16, 5
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.known_answer:
        ctx = prepare(args)
        print(json.dumps(known_answer_curve(ctx["setups"]["xs"], ctx["data"]), indent=1))
        return 0
    if not args.quick and args.cell is None:
        return run_grid(args, prepare(args)["header"])
    ctx = prepare(args)
    return run_quick(args, ctx) if args.quick else run_one(args, ctx)


if __name__ == "__main__":
    raise SystemExit(main())
