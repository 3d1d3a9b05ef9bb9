"""``hypertrain run init``: write a complete, commented run manifest (docs/operator.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hypertrain.ops.manifest import RunOptions, build_manifest, commented


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("run", help="write a run manifest for the challenge service")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    init = sub.add_parser("init", help="a complete, commented manifest from a preset and dataset")
    d = RunOptions(run_id="x", dataset_dir=Path())
    init.add_argument("--run-id", required=True, help="the run's name")
    init.add_argument("--dataset-dir", type=Path, required=True, help="prepared dataset dir")
    init.add_argument("--out", type=Path, required=True, help="manifest file to write")
    init.add_argument("--preset", default=d.preset, help=f"model preset (default {d.preset})")
    init.add_argument("--seed", type=int, default=d.seed, help="genesis seed")
    init.add_argument("--h", type=int, default=d.inner_steps, help="inner steps per round (H)")
    init.add_argument("--j", type=int, default=d.checkpoint_interval, help="checkpoint interval")
    init.add_argument("--micro-batch-size", type=int, default=d.micro_batch_size)
    init.add_argument("--max-micro-batches", type=int, default=d.max_micro_batches,
                      help="largest island budget (micro-batches per step) admitted")  # fmt: skip
    init.add_argument("--commit-window-rounds", type=int, default=d.commit_window_rounds,
                      help="beacon rounds a round may stay open for commits")  # fmt: skip
    init.add_argument("--audit-window-rounds", type=int, default=d.audit_window_rounds,
                      help="beacon rounds auditors get")  # fmt: skip
    init.add_argument("--dispute-window-rounds", type=int, default=d.dispute_window_rounds)
    init.add_argument("--audit-rate", type=float, default=d.audit_rate)
    init.add_argument("--audit-segments", type=int, default=d.audit_segments)
    init.add_argument("--probation-rounds", type=int, default=d.probation_rounds)
    init.add_argument("--pool-per-round", type=int, default=d.pool_per_round)
    init.add_argument("--vesting-rounds", type=int, default=d.vesting_rounds)
    init.add_argument("--threads", type=int, default=d.threads, help="replay thread count")
    init.add_argument("--device", default=d.device, help="device of the determinism record")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.set_defaults(func=_init)


def _init(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.force:
        raise ValueError(f"{args.out} exists (pass --force to overwrite it)")
    opts = RunOptions(
        run_id=args.run_id,
        preset=args.preset,
        dataset_dir=args.dataset_dir,
        seed=args.seed,
        inner_steps=args.h,
        checkpoint_interval=args.j,
        micro_batch_size=args.micro_batch_size,
        max_micro_batches=args.max_micro_batches,
        commit_window_rounds=args.commit_window_rounds,
        audit_window_rounds=args.audit_window_rounds,
        dispute_window_rounds=args.dispute_window_rounds,
        audit_rate=args.audit_rate,
        audit_segments=args.audit_segments,
        probation_rounds=args.probation_rounds,
        pool_per_round=args.pool_per_round,
        vesting_rounds=args.vesting_rounds,
        threads=args.threads,
        device=args.device,
    )
    doc = build_manifest(opts)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(commented(doc), encoding="utf-8")
    data = doc["data"]
    sys.stdout.write(
        f"wrote {args.out}: run {doc['run_id']}, preset {doc['model']['preset']},"
        f" dataset root {data['dataset_root']}\n"
        f"next: hypertrain challenge create-run --url URL --admin-token-file FILE"
        f" --manifest {args.out}\n"
    )
    return 0
