"""``hypertrain run``: write a complete, commented run manifest (``init``), size its
admission workload, train or check its warm start, export its model (docs/operator.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hypertrain.ops.manifest import RunOptions, build_manifest, commented
from hypertrain.protocol.cliargs import add_relay_url, add_service_url
from hypertrain.protocol.manifest import INNER_OPTIMIZERS
from hypertrain.trainer.presets import PRESETS

# (flag, RunOptions field, help) of the integer settings, in the order --help lists them
_INT_FLAGS = (
    ("--h", "inner_steps", "inner steps per round (H)"),
    ("--j", "checkpoint_interval", "checkpoint interval in steps (J; divides H; 0: H)"),
    ("--rounds", "rounds", "rounds the LR schedule plans; the dashboard's total"),
    ("--micro-batch-size", "micro_batch_size", "samples per micro-batch"),
    ("--max-micro-batches", "max_micro_batches", "largest island budget (micro-batches per step)"),
    (
        "--commit-window-rounds",
        "commit_window_rounds",
        "beacon rounds a round stays open for commits",
    ),
    ("--audit-window-rounds", "audit_window_rounds", "beacon rounds auditors get"),
    ("--dispute-window-rounds", "dispute_window_rounds", "beacon rounds a verdict can be disputed"),
    ("--audit-segments", "audit_segments", "J-segments replayed per audited island"),
    ("--probation-rounds", "probation_rounds", "rounds a new island is audited every round"),
    ("--pool-per-round", "pool_per_round", "integer reward pool of a round (base units)"),
    ("--vesting-rounds", "vesting_rounds", "rounds over which escrow vests"),
    ("--threads", "threads", "torch threads of the determinism record (replay thread count)"),
    (
        "--warm-start-percent",
        "warm_start_percent",
        "share of all steps trained data-parallel before round 0 (0: no warm start)",
    ),
    (
        "--warm-start-batch",
        "warm_start_batch",
        "samples per warm-start step (0: eight islands' batches at the default layout)",
    ),
    (
        "--admission-workload-steps",
        "admission_workload_steps",
        "admission challenge workload length from `run size-admission` on the run's device"
        " class (0: --admission-device-class or --local decides)",
    ),
    (
        "--admission-window-rounds",
        "admission_window_rounds",
        "beacon rounds an island has to answer its admission challenge",
    ),
    (
        "--dispute-answer-rounds",
        "dispute_answer_rounds",
        "beacon rounds a dispute party has per answer; refused under one segment's replay"
        " (0: sized to it)",
    ),
    (
        "--beacon-period-s",
        "beacon_period_s",
        "seconds per beacon round the dispute deadlines are sized for (drand quicknet: 3)",
    ),
)

# (flag, type, default, help) of `run size-admission`
_SIZING_FLAGS: tuple[tuple[str, type, float, str], ...] = (
    ("--period-s", float, 3.0, "beacon period in seconds (drand quicknet: 3)"),
    ("--window-rounds", int, 2, "admission.answer_window_rounds"),
    (
        "--fill",
        float,
        0.6,
        "share of the window the workload alone takes; above 0.5 one"
        " device answers for one hotkey per window",
    ),
    (
        "--claim-gib",
        float,
        0.0,
        "per-device memory claim whose table each answer builds (0: the smallest claim)",
    ),
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("run", help="write a run manifest for the challenge service")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    init = sub.add_parser("init", help="a complete, commented manifest from a preset and dataset")
    d = RunOptions(run_id="x", dataset_dir=Path())
    init.add_argument("--run-id", required=True, help="the run's name")
    init.add_argument("--dataset-dir", type=Path, required=True, help="prepared dataset dir")
    init.add_argument("--out", type=Path, required=True, help="manifest file to write")
    names = ", ".join(sorted(PRESETS))
    init.add_argument("--preset", default=d.preset, choices=sorted(PRESETS), metavar="NAME",
                      help=f"model preset: {names} (default {d.preset})")  # fmt: skip
    init.add_argument("--seed", type=int, default=d.seed, help="genesis seed (default %(default)s)")
    for flag, dest, text in _INT_FLAGS:
        init.add_argument(flag, dest=dest, type=int, default=getattr(d, dest),
                          help=f"{text} (default %(default)s)")  # fmt: skip
    init.add_argument("--audit-rate", type=float, default=d.audit_rate,
                      help="share of islands audited per round (default %(default)s)")  # fmt: skip
    init.add_argument("--device", default=d.device,
                      help="device of the determinism record (default %(default)s)")  # fmt: skip
    init.add_argument("--admission-device-class", default="", metavar="CLASS",
                      help="size the admission workload by measuring --device here, which"
                      " must be of CLASS (as `run size-admission` does)")  # fmt: skip
    init.add_argument("--local", action="store_true",
                      help="a network on one machine: the manifest's 8-step admission"
                      " workload, which bounds no sybil farm")  # fmt: skip
    init.add_argument("--overlap", action="store_true",
                      help="overlapped rounds: islands train round r + 1 while round r is"
                      " audited and merged (docs/protocol.md, docs/parity.md)")  # fmt: skip
    init.add_argument("--optimizer", choices=INNER_OPTIMIZERS, default=d.optimizer,
                      help="the islands' inner optimizer (default %(default)s, the recipe's;"
                      " muon: Muon on the matrices, AdamW on embeddings and norms)")  # fmt: skip
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.set_defaults(func=_init)

    sizing = sub.add_parser(
        "size-admission",
        help="measure this device and size the admission workload to its answer window",
    )
    sizing.add_argument("--device", default="cpu", help="device to measure (default cpu)")
    for flag, kind, default, text in _SIZING_FLAGS:
        sizing.add_argument(flag, type=kind, default=default, help=f"{text} (default %(default)s)")
    sizing.set_defaults(func=_size_admission)

    warm = sub.add_parser(
        "warm-start",
        help="train the run's data-parallel warm start (round 0's model), or check round 0's",
    )
    source = warm.add_mutually_exclusive_group(required=True)
    source.add_argument("--manifest", type=Path, help="the run's manifest file (run init's)")
    add_service_url(source, "challenge service base URL: the served manifest")
    warm.add_argument("--run-id", help="the run (with --service-url)")
    warm.add_argument("--coordinator", help="pinned coordinator SS58 (with --service-url)")
    warm.add_argument("--dataset-dir", type=Path, required=True, help="the run's dataset dir")
    warm.add_argument("--out", type=Path, help="write round 0's model blob here")
    warm.add_argument("--expect-sha256", help="refuse (exit 1) a model other than this one"
                      " (with --service-url it defaults to round 0's signed start"
                      " model)")  # fmt: skip
    warm.add_argument("--device", default="cpu", help="device to train on (default cpu)")
    warm.set_defaults(func=_warm_start)

    exp = sub.add_parser(
        "export", help="the newest merged model with its tokenizer, as a Llama directory"
    )
    add_service_url(exp, required=True)
    add_relay_url(exp, "relay base URL (where the model is)", required=True)
    exp.add_argument("--run-id", required=True, help="the run")
    exp.add_argument("--tokenizer", type=Path, required=True,
                     help="the run's tokenizer.json (DATASET/tokenizer.json)")  # fmt: skip
    exp.add_argument("--coordinator", help="pinned coordinator SS58 (recommended)")
    exp.add_argument("--out", type=Path, required=True, help="output directory")
    exp.set_defaults(func=_export)


def _export(args: argparse.Namespace) -> int:
    from hypertrain.ops.export import export_run

    done = export_run(
        args.service_url, args.relay_url, args.run_id, args.tokenizer, args.out, args.coordinator
    )
    sys.stdout.write(
        f"exported round {done.round} of {done.run_id} (model {done.model_sha256[:16]}…)"
        f" to {done.out_dir}: config.json, model.safetensors, tokenizer.json\n"
    )
    return 0


def _warm_start(args: argparse.Namespace) -> int:
    import json

    from hypertrain.ops.warm_start import warm_start, warm_start_inputs

    manifest, expect = warm_start_inputs(
        manifest_file=args.manifest,
        service_url=args.service_url,
        run_id=args.run_id,
        coordinator=args.coordinator,
        expect_sha256=args.expect_sha256,
        writes=args.out is not None,
    )
    result = warm_start(
        manifest, args.dataset_dir, out=args.out, expect_sha256=expect, device=args.device
    )
    sys.stdout.write(json.dumps(result.as_json(), sort_keys=True) + "\n")
    return 0


def _size_admission(args: argparse.Namespace) -> int:
    import json

    import torch

    from hypertrain.miner.admission import device_memory
    from hypertrain.ops.admission_size import measure, size
    from hypertrain.protocol.memproof import MIN_CLAIM_BYTES

    if args.window_rounds < 1 or args.period_s <= 0:
        raise ValueError("--window-rounds must be at least 1 and --period-s positive")
    claim = max(MIN_CLAIM_BYTES, int(args.claim_gib * (1 << 30)))
    device = torch.device(args.device)
    window_s = args.window_rounds * args.period_s
    sizing = size(measure(device), window_s, args.fill, claim, device_memory(device))
    sys.stdout.write(json.dumps(sizing.as_json(), sort_keys=True) + "\n")
    return 0


def _init(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.force:
        raise ValueError(f"{args.out} exists (pass --force to overwrite it)")
    opts = RunOptions(
        run_id=args.run_id,
        preset=args.preset,
        dataset_dir=args.dataset_dir,
        seed=args.seed,
        inner_steps=args.inner_steps,
        checkpoint_interval=args.checkpoint_interval,
        rounds=args.rounds,
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
        warm_start_percent=args.warm_start_percent,
        warm_start_batch=args.warm_start_batch,
        admission_workload_steps=args.admission_workload_steps,
        admission_window_rounds=args.admission_window_rounds,
        overlap=args.overlap,
        optimizer=args.optimizer,
        admission_device_class=args.admission_device_class,
        local=args.local,
        dispute_answer_rounds=args.dispute_answer_rounds,
        beacon_period_s=args.beacon_period_s,
        device=args.device,
    )
    doc = build_manifest(opts)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(commented(doc), encoding="utf-8")
    data = doc["data"]
    sys.stdout.write(
        f"wrote {args.out}: run {doc['run_id']}, preset {doc['model']['preset']},"
        f" dataset root {data['dataset_root']}\n"
        f"next: hypertrain challenge create-run --service-url URL --admin-token-file FILE"
        f" --manifest {args.out}\n"
        "the service pays a round only once a tape witness agreed with its tape: name the"
        " witness keys in HYPERTRAIN_WITNESS_HOTKEYS (docs/operator.md, Tape witnesses)\n"
    )
    return 0
