"""``hypertrain auditor``: replay assigned segments and post signed verdicts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hypertrain.auditor.runner import Auditor, audit_round, emit_json, follow
from hypertrain.challenge.client import ChallengeClient
from hypertrain.evidence.verify import verify_manifest
from hypertrain.protocol.identity import load_key_file
from hypertrain.relay.client import RelayClient
from hypertrain.trainer.determinism import check_determinism, configure_determinism
from hypertrain.trainer.profile import apply_profile


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("auditor", help="replay sampled segments, post verdicts")
    sub = parser.add_subparsers(dest="auditor_command", metavar="COMMAND", required=True)
    run = sub.add_parser("run", help="audit one round (--round) or every round (--follow)")
    run.add_argument("--service", required=True, help="challenge service base URL")
    run.add_argument("--relay", required=True, help="relay base URL")
    run.add_argument("--run-id", required=True, help="run to audit")
    run.add_argument("--key-file", type=Path, required=True, help="auditor hotkey file")
    run.add_argument(
        "--worker-token-file", type=Path, required=True, help="file holding the worker token"
    )
    run.add_argument("--dataset-dir", type=Path, required=True, help="prepared dataset dir")
    run.add_argument("--coordinator", default="", help="pinned coordinator SS58 (recommended)")
    run.add_argument("--device", default="cpu", help="torch device to replay on")
    run.add_argument("--round", type=int, help="audit this round once and exit")
    run.add_argument("--follow", action="store_true", help="audit each round as it opens")
    run.add_argument("--poll-s", type=float, default=1.0, help="seconds between polls")
    run.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if (args.round is None) == (not args.follow):
        raise ValueError("give exactly one of --round W or --follow")
    token = args.worker_token_file.read_text(encoding="utf-8").strip()
    service = ChallengeClient(args.service, worker_token=token)
    manifest = verify_manifest(
        service.manifest_envelope(args.run_id), args.run_id, args.coordinator or None
    )
    det = manifest.determinism
    apply_profile(det)  # may re-execute this process with the run's CPU switches
    check_determinism(configure_determinism(det.num_threads, args.device, det.dtype), det)
    key = load_key_file(args.key_file)
    with RelayClient(args.relay, key, args.run_id) as relay:
        auditor = Auditor(service, relay, key, manifest, args.dataset_dir, device=args.device)
        emit_json("started", run_id=args.run_id, hotkey=key.ss58_address)
        if args.follow:
            follow(auditor, poll_s=args.poll_s)
            return 0
        outcomes = audit_round(auditor, args.round)
    return 0 if all(o.result == "match" for o in outcomes) else 2
