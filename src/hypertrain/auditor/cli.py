"""``hypertrain auditor``: replay assigned segments and post signed verdicts.

Before any replay the command checks what it needs (``auditor.start``): the device, the
hotkey, the worker token (a worker route must accept it), the relay (its health route
must answer) and the signed manifest. A refusal ends it with one line and exit status 1;
a service or relay that is down or failing does too for ``--round W``, while ``--follow``
waits for it (``service_unreachable``, ``relay_unreachable``). A refusal that only the
work reveals (this hotkey is not one of the service's workers: 403) ends ``--follow`` the
same way; ``--round W`` exits 1 when an assignment could not be judged and posted, 2
when a verdict is ``mismatch``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.auditor.follow import follow
from hypertrain.auditor.runner import Auditor, RoundProgress, audit_round, emit_json
from hypertrain.auditor.start import AuditorRefusedError, refusal, start_manifest
from hypertrain.protocol.cliargs import add_relay_url, add_service_url
from hypertrain.protocol.keyargs import add_wallet_flags, key_from_args
from hypertrain.relay.client import RelayClient
from hypertrain.trainer.determinism import check_determinism, configure_determinism
from hypertrain.trainer.device import require_device
from hypertrain.trainer.profile import apply_profile


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("auditor", help="replay sampled segments, post verdicts")
    sub = parser.add_subparsers(dest="auditor_command", metavar="COMMAND", required=True)
    run = sub.add_parser("run", help="audit one round (--round) or every round (--follow)")
    add_service_url(run, required=True)
    add_relay_url(run, required=True)
    run.add_argument("--run-id", required=True, help="run to audit")
    add_wallet_flags(run, what="auditor hotkey")
    run.add_argument(
        "--worker-token-file", type=Path, required=True, help="file holding the worker token"
    )
    run.add_argument("--dataset-dir", type=Path, required=True, help="prepared dataset dir")
    run.add_argument("--coordinator", default="", help="pinned coordinator SS58 (recommended)")
    run.add_argument("--device", default="cpu", help="torch device to replay on")
    run.add_argument("--round", type=int, help="audit this round once and exit")
    run.add_argument("--follow", action="store_true", help="audit each round as it opens")
    run.add_argument("--poll-s", type=float, default=1.0, help="seconds between polls (default 1)")
    run.add_argument(
        "--standby",
        action="store_true",
        help="with --follow: a standby juror, which only re-audits what the service lists as"
        " waiting (its key in the service's HYPERTRAIN_STANDBY_HOTKEYS)",
    )
    run.set_defaults(func=_run)


def read_worker_token(path: Path) -> str:
    """The worker token in ``path`` (a missing or empty file is one clear line)."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise AuditorRefusedError(f"--worker-token-file {path}: {exc.strerror}") from None
    if not token:
        raise AuditorRefusedError(f"--worker-token-file {path} is empty")
    return token


def _run(args: argparse.Namespace) -> int:
    if (args.round is None) == (not args.follow):
        raise ValueError("give exactly one of --round W or --follow")
    if args.standby and not args.follow:
        raise ValueError("--standby re-audits as the run goes: give it with --follow")
    require_device(args.device)
    key = key_from_args(args)
    service = ChallengeClient(
        args.service_url, worker_token=read_worker_token(args.worker_token_file)
    )
    manifest = start_manifest(
        service, args.relay_url, args.run_id, args.coordinator or None, follow=args.follow
    )
    assert manifest is not None  # no stop signal is caught: SIGTERM ends the process
    det = manifest.determinism
    apply_profile(det)  # may re-execute this process with the run's CPU switches
    check_determinism(configure_determinism(det.num_threads, args.device, det.dtype), det)
    with RelayClient(args.relay_url, key, args.run_id) as relay:
        auditor = Auditor(service, relay, key, manifest, args.dataset_dir, device=args.device)
        emit_json("started", run_id=args.run_id, hotkey=key.ss58_address, standby=args.standby)
        try:
            if args.follow:
                follow(auditor, poll_s=args.poll_s, standby=args.standby)
                return 0
            progress = RoundProgress()
            outcomes = audit_round(auditor, args.round, progress=progress)
        except ServiceError as exc:
            raise AuditorRefusedError(refusal(exc, service.base_url)) from None
    if progress.unfinished:
        raise AuditorRefusedError(
            f"round {args.round}: {progress.unfinished} assignment(s) could not be judged and"
            " posted (see the error events above)"
        )
    return 0 if all(o.result == "match" for o in outcomes) else 2
