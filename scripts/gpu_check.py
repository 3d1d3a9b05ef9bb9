"""Determinism and speed on a GPU machine, as one JSON document (``scripts/gpu-check.sh``).

Checks, for the 50m preset (float32 and bf16 autocast):

* two runs of the same segment in this process give the same state hash;
* a second process (this script with ``--child``) gives the same hash again;
* with two or more devices, a two-rank NCCL island (two processes, a file store)
  ends in the emulation's state hash, with and without ZeRO-1;
* the step time with every determinism switch on against the switches off
  (deterministic algorithms off, cuDNN benchmark on, TF32 on, every attention
  backend allowed), tokens per second and model FLOPs utilisation.

``--dry-run`` runs the same code on the CPU with the tiny preset and a few steps, so
the script can be checked on a machine without a GPU. Run:
``python scripts/gpu_check.py [--out gpu-check.json] [--steps N] [--dry-run]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hypertrain.protocol.manifest import InnerOptimSpec, LayoutSpec
from hypertrain.trainer.determinism import configure_determinism, current_record
from hypertrain.trainer.presets import PRESETS, flops_per_token
from hypertrain.trainer.segment import TrainConfig, run_segment
from hypertrain.trainer.state import TrainState, init_state

# Dense peak TFLOP/s by device name fragment: (float32 without TF32, bf16 tensor cores).
PEAK_TFLOPS = {
    "H200": (67.0, 989.0),
    "H100": (67.0, 989.0),
    "A100": (19.5, 312.0),
    "L40S": (91.6, 362.0),
    "A10": (31.2, 125.0),
    "4090": (82.6, 165.0),
}


def make_config(dry_run: bool, device: str, dtype: str, ranks: int = 1) -> TrainConfig:
    model = PRESETS["tiny" if dry_run else "50m"]
    seq_len = 17 if dry_run else 1025
    return TrainConfig(
        model=model,
        inner=InnerOptimSpec(warmup_steps=2, total_steps=1000),
        layout=LayoutSpec(dp_ranks=ranks, micro_batches=1, micro_batch_size=2 if dry_run else 8),
        seq_len=seq_len,
        inner_steps=1,
        checkpoint_interval=1,
        dtype="bfloat16" if dtype == "bfloat16" else "float32",
        device=device,
    )


def make_samples(config: TrainConfig, steps: int) -> list[tuple[int, Any]]:
    rng = np.random.default_rng(0)
    count = steps * config.samples_per_step
    vocab = config.model.vocab_size
    return [(i, rng.integers(0, vocab, config.seq_len).astype(np.int64)) for i in range(count)]


def train(config: TrainConfig, steps: int) -> tuple[TrainState, float]:
    """Train ``steps`` steps from the seed-1 start; returns the end state and s/step
    (the first step is a warm-up and not timed)."""
    start = init_state(config.state_config(), 1)
    samples = make_samples(config, steps + 1)
    per = config.samples_per_step
    state = run_segment(start, config, samples[:per], 1)
    sync(config.device)
    t0 = time.perf_counter()
    state = run_segment(state, config, samples[per:], steps, local_step=1)
    sync(config.device)
    return state, (time.perf_counter() - t0) / steps


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def nondeterministic(device: str) -> None:
    """Every switch off: what an ordinary training script would run with."""
    torch.use_deterministic_algorithms(False)
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.deterministic = False
        torch.backends.cuda.enable_flash_sdp(True)
        torch.backends.cuda.enable_mem_efficient_sdp(True)


def peak_tflops(device: str, dtype: str) -> float | None:
    if not device.startswith("cuda"):
        return None
    name = torch.cuda.get_device_name(torch.device(device))
    for key, (fp32, bf16) in PEAK_TFLOPS.items():
        if key in name:
            return bf16 if dtype == "bfloat16" else fp32
    return None


def child(args: argparse.Namespace) -> None:
    configure_determinism(1, args.device, args.dtype)
    state, _ = train(make_config(args.dry_run, args.device, args.dtype), args.steps)
    print(json.dumps({"hash": state.state_hash().hex()}))


def run_child(args: argparse.Namespace, dtype: str) -> str:
    cmd = [sys.executable, __file__, "--child", "--dtype", dtype, "--steps", str(args.steps)]
    cmd += ["--device", args.device] + (["--dry-run"] if args.dry_run else [])
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    doc: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return doc["hash"]


def island_rank(args: argparse.Namespace) -> None:
    """One rank of the two-rank island (``--rank R --store PATH``)."""
    import torch.distributed as dist

    from hypertrain.trainer.distributed import Island, RankGroup

    device = f"cuda:{args.rank}" if args.device.startswith("cuda") else "cpu"
    if device.startswith("cuda"):
        torch.cuda.set_device(args.rank)
    configure_determinism(1, device, args.dtype)
    backend = "nccl" if device.startswith("cuda") else "gloo"
    dist.init_process_group(
        backend, init_method=f"file://{args.store}", rank=args.rank, world_size=2
    )
    config = make_config(args.dry_run, device, args.dtype, ranks=2)
    samples = make_samples(config, args.steps)
    hashes = {}
    for zero1 in (False, True):
        island = Island(
            init_state(config.state_config(), 1), config, RankGroup(args.rank, 2), zero1=zero1
        )
        per = config.samples_per_step
        for step in range(args.steps):  # the round loop's stepper, one step at a time
            island.advance(samples[step * per : (step + 1) * per], step)
        hashes["zero1" if zero1 else "dp"] = island.state_hash().hex()
    dist.destroy_process_group()
    if args.rank == 0:
        print(json.dumps(hashes))


def island_check(args: argparse.Namespace) -> dict[str, Any]:
    devices = torch.cuda.device_count() if args.device.startswith("cuda") else 2
    if devices < 2:
        return {"skipped": f"{devices} device(s); the island check needs two"}
    config = make_config(args.dry_run, args.device, args.dtype, ranks=2)
    emulated = (
        run_segment(
            init_state(config.state_config(), 1),
            config,
            make_samples(config, args.steps),
            args.steps,
        )
        .state_hash()
        .hex()
    )
    with tempfile.TemporaryDirectory() as tmp:
        base = [
            sys.executable,
            __file__,
            "--store",
            str(Path(tmp) / "store"),
            "--dtype",
            args.dtype,
        ]
        base += ["--steps", str(args.steps), "--device", args.device]
        base += ["--dry-run"] if args.dry_run else []
        procs = [
            subprocess.Popen([*base, "--rank", str(r)], stdout=subprocess.PIPE, text=True)
            for r in range(2)
        ]
        outs = [p.communicate(timeout=300)[0] for p in procs]
        if any(p.returncode for p in procs):
            return {"error": "an island rank failed", "equal": False}
    hashes: dict[str, str] = json.loads(outs[0].strip().splitlines()[-1])
    return {
        "emulated": emulated,
        **hashes,
        "equal": hashes["dp"] == emulated and hashes["zero1"] == emulated,
    }


def check_dtype(args: argparse.Namespace, dtype: str) -> dict[str, Any]:
    configure_determinism(1, args.device, dtype)
    config = make_config(args.dry_run, args.device, dtype)
    first, step_s = train(config, args.steps)
    second, _ = train(config, args.steps)
    other = run_child(args, dtype)
    nondeterministic(args.device)
    _, fast_s = train(config, args.steps)
    configure_determinism(1, args.device, dtype)
    tokens_per_s = config.tokens_per_step / step_s
    flops = flops_per_token(config.model, config.seq_len - 1)["train"] * tokens_per_s
    peak = peak_tflops(args.device, dtype)
    return {
        "two_runs_equal": first.state_hash() == second.state_hash(),
        "two_processes_equal": first.state_hash().hex() == other,
        "hash": first.state_hash().hex(),
        "step_s": step_s,
        "nondeterministic_step_s": fast_s,
        "deterministic_vs_nondeterministic_throughput": fast_s / step_s,
        "tokens_per_s": tokens_per_s,
        "model_tflops": flops / 1e12,
        "mfu": flops / (peak * 1e12) if peak else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("gpu-check.json"), help="result JSON")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per measurement")
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny preset")
    parser.add_argument("--device", default="", help="default: cuda:0, or cpu with --dry-run")
    parser.add_argument("--dtype", default="float32", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.device = args.device or ("cpu" if args.dry_run else "cuda:0")
    if args.child:
        child(args)
        return 0
    if args.rank is not None:
        island_rank(args)
        return 0
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: run with --dry-run to check the script on a CPU", file=sys.stderr)
        return 2
    dtypes = ["float32"] if args.device == "cpu" else ["float32", "bfloat16"]
    doc: dict[str, Any] = {"device": args.device, "dry_run": args.dry_run, "steps": args.steps}
    doc["record"] = current_record(args.device).model_dump()
    for dtype in dtypes:
        doc[dtype] = check_dtype(args, dtype)
    args.dtype = "float32"
    doc["island"] = island_check(args)
    doc["ok"] = all(doc[d]["two_runs_equal"] and doc[d]["two_processes_equal"] for d in dtypes)
    doc["ok"] = doc["ok"] and doc["island"].get("equal", True)
    args.out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(json.dumps({"ok": doc["ok"], "out": str(args.out)}))
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
