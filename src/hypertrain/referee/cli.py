"""``hypertrain referee``: the dispute referee (its key must be listed in the manifest).

``serve`` is long-lived: a service that cannot be reached or fails (5xx) when it starts is
``service_unreachable`` and waited for (``rolekit.when_up``); a refusal (an unknown run)
ends it with one line."""

from __future__ import annotations

import argparse
from typing import Any

from hypertrain.api.client import ChallengeClient
from hypertrain.evidence.verify import verify_manifest
from hypertrain.protocol.cliargs import add_service_url
from hypertrain.protocol.keyargs import add_wallet_flags, key_from_args
from hypertrain.referee.worker import Referee, emit_json, serve
from hypertrain.rolekit import when_up
from hypertrain.trainer.determinism import check_determinism, configure_determinism
from hypertrain.trainer.device import require_device
from hypertrain.trainer.profile import apply_profile


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("referee", help="rule on contested operations of disputes")
    sub = parser.add_subparsers(dest="referee_command", metavar="COMMAND", required=True)
    run = sub.add_parser("serve", help="poll the service and rule on every contested operation")
    add_service_url(run, required=True)
    run.add_argument("--run-id", required=True, help="run whose disputes to rule on")
    add_wallet_flags(run, what="referee hotkey")
    run.add_argument("--coordinator", default="", help="pinned coordinator SS58 (recommended)")
    run.add_argument("--device", default="cpu", help="torch device to recompute on")
    run.add_argument("--poll-s", type=float, default=1.0, help="seconds between polls (default 1)")
    run.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    key = key_from_args(args)
    require_device(args.device)
    service = ChallengeClient(args.service_url)

    def waiting(exc: Exception, delay: float) -> None:  # a long-lived role waits for it
        emit_json("service_unreachable", detail=str(exc)[:300], retry_in_s=delay)

    envelope = when_up(lambda: service.manifest_envelope(args.run_id), on_wait=waiting)
    assert envelope is not None  # no stop is asked: a stop signal ends the process
    manifest = verify_manifest(envelope, args.run_id, args.coordinator or None)
    det = manifest.determinism
    apply_profile(det)  # may re-execute this process with the run's CPU switches
    check_determinism(configure_determinism(det.num_threads, args.device, det.dtype), det)
    if key.ss58_address not in manifest.dispute.referees:
        raise ValueError(f"{key.ss58_address} is not a referee of {args.run_id}")
    emit_json("started", run_id=args.run_id, hotkey=key.ss58_address)
    serve(Referee(service, key, args.run_id), poll_s=args.poll_s)
    return 0
