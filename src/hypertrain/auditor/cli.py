"""``hypertrain auditor``: replay assigned segments and post signed verdicts.

Before any replay the command checks what it needs and ends with one line and exit
status 1 when something is refused or down: the device, the hotkey, the worker token
(a worker route must accept it), the relay (its health route must answer) and the
signed manifest. A refusal that only the work reveals (this hotkey is not one of the
service's workers: 403) ends ``--follow`` the same way; ``--round W`` exits 1 when an
assignment could not be judged and posted, 2 when a verdict is ``mismatch``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import httpx

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.auditor.follow import follow
from hypertrain.auditor.runner import Auditor, RoundProgress, audit_round, emit_json
from hypertrain.evidence.verify import verify_manifest
from hypertrain.protocol.cliargs import add_relay_url, add_service_url
from hypertrain.protocol.keyargs import add_wallet_flags, key_from_args
from hypertrain.relay.client import RelayClient
from hypertrain.trainer.determinism import check_determinism, configure_determinism
from hypertrain.trainer.device import require_device
from hypertrain.trainer.profile import apply_profile


class AuditorRefusedError(ValueError):
    """The service or relay refused this auditor, or cannot be reached: nothing to do."""


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


def preflight(service: ChallengeClient, relay_url: str, run_id: str) -> None:
    """The worker token is accepted and the relay answers; else :class:`AuditorRefusedError`."""
    try:
        service.admissions(run_id)  # a worker route: checks the token, touches nothing
    except ServiceError as exc:
        raise AuditorRefusedError(_refusal(exc, service.base_url)) from None
    health = relay_url.rstrip("/") + "/healthz"
    try:
        answer = httpx.get(health, timeout=10)
    except httpx.HTTPError as exc:
        host = httpx.URL(health).netloc.decode()
        reason = str(exc) or type(exc).__name__
        raise AuditorRefusedError(f"cannot reach the relay at {host}: {reason}") from None
    if not answer.is_success:
        raise AuditorRefusedError(f"the relay at {relay_url} answered HTTP {answer.status_code}")


def _refusal(exc: ServiceError, base_url: str) -> str:
    """What to do about a refusal of this auditor, in one line."""
    if exc.status == 401:
        return (
            f"the service at {base_url} refused the worker token (401): --worker-token-file must"
            " hold the token of the service's CHALLENGE_WORKER_TOKEN_FILE"
        )
    if exc.status == 403:
        return (
            f"the service at {base_url} refused this auditor (403): add its hotkey to the"
            f" service's HYPERTRAIN_WORKER_HOTKEYS ({exc})"
        )
    return str(exc)


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
    preflight(service, args.relay_url, args.run_id)
    manifest = verify_manifest(
        service.manifest_envelope(args.run_id), args.run_id, args.coordinator or None
    )
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
            raise AuditorRefusedError(_refusal(exc, service.base_url)) from None
    if progress.unfinished:
        raise AuditorRefusedError(
            f"round {args.round}: {progress.unfinished} assignment(s) could not be judged and"
            " posted (see the error events above)"
        )
    return 0 if all(o.result == "match" for o in outcomes) else 2
