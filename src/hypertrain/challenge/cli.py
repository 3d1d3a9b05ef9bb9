"""``hypertrain challenge``: serve the service and drive it as an operator.

``serve`` runs uvicorn on the app built from the environment (docs/operator.md);
``create-run`` and ``open-round`` call the admin routes with the admin token read
from a file (never from the command line); ``check-selection`` recomputes a round's
audit selection from its public data and compares it with the published one;
``weights`` makes the platform's ``get_weights`` call by hand (``weights_cli``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, JsonValue, TypeAdapter, ValidationError

from hypertrain.api.disputes import HoneypotAnswer
from hypertrain.api.models import HealthAnswer, RoundDetail, RunListItem, VersionAnswer
from hypertrain.challenge import weights_cli
from hypertrain.challenge.rounds.selection import select_audits
from hypertrain.challenge.settings import read_token_file
from hypertrain.protocol.cliargs import add_service_url
from hypertrain.protocol.envelope import Envelope, open_envelope
from hypertrain.protocol.errors import EnvelopeError
from hypertrain.protocol.listen import bind_listener, serve_asgi
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.manifest_file import manifest_document
from hypertrain.protocol.messages import AuditAssignment, ManifestRecord, RoundOpen


class OperatorError(ValueError):
    """A service that is down, answers with something else, or refuses a request."""


T = TypeVar("T")
B = TypeVar("B", bound=BaseModel)
_ENVELOPE = TypeAdapter(Envelope)
_HEALTH = TypeAdapter(HealthAnswer)
_RUNS = TypeAdapter(list[RunListItem])
_DETAIL = TypeAdapter(RoundDetail)
_HONEYPOTS = TypeAdapter(HoneypotAnswer)
_VERSION = TypeAdapter(VersionAnswer)
LOCAL_SERVICE = "http://127.0.0.1:8000"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("challenge", help="the challenge service (coordinator)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    serve = sub.add_parser("serve", help="run the service (settings from the environment)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind")
    serve.add_argument("--port", type=int, default=8000, help="port to bind")
    serve.add_argument(
        "--fd",
        type=int,
        help="serve on this inherited listening socket instead of --host/--port",
    )
    serve.add_argument(
        "--ready-file",
        type=Path,
        help="write {pid, url} here once the port is bound (for `challenge status --ready-file`)",
    )
    serve.set_defaults(func=_serve)

    create = sub.add_parser("create-run", help="create a run from a manifest JSON file")
    _client_args(create)
    create.add_argument("--manifest", type=Path, required=True, help="run manifest JSON file")
    create.add_argument(
        "--coordinator-out", type=Path, help="also write the coordinator's SS58 to this file"
    )
    create.set_defaults(func=_create_run)

    open_round = sub.add_parser("open-round", help="open the next round of a run")
    _client_args(open_round)
    open_round.add_argument("--run-id", required=True, help="the run")
    open_round.add_argument("--start-model-sha256", help="start model hash (default: merged)")
    open_round.add_argument("--start-model-url", help="where the start model can be fetched")
    open_round.set_defaults(func=_open_round)

    check = sub.add_parser("check-selection", help="recompute a round's audit selection")
    add_service_url(check, default=LOCAL_SERVICE)
    check.add_argument("--run-id", required=True, help="the run")
    check.add_argument("--round", type=int, required=True, help="the round index")
    check.set_defaults(func=_check_selection)

    status = sub.add_parser("status", help="is the service up: beacon round, metagraph, runs")
    add_service_url(status, default=LOCAL_SERVICE)
    status.add_argument(
        "--wait-s", type=float, default=0.0, help="wait up to this long for it to answer"
    )
    status.add_argument(
        "--ready-file",
        type=Path,
        help="the ready file of `challenge serve`: up only if that process holds the port",
    )
    status.set_defaults(func=_status)

    pots = sub.add_parser("honeypots", help="print the revealed honeypots' per-strategy table")
    add_service_url(pots, default=LOCAL_SERVICE)
    pots.add_argument("--run-id", required=True, help="the run")
    pots.set_defaults(func=_honeypots)

    weights_cli.register(sub, LOCAL_SERVICE)


def _client_args(parser: argparse.ArgumentParser) -> None:
    add_service_url(parser, default=LOCAL_SERVICE)
    parser.add_argument(
        "--admin-token-file", type=Path, required=True, help="file holding the admin token"
    )


def _serve(args: argparse.Namespace) -> int:
    from hypertrain.challenge.app import create_app
    from hypertrain.challenge.settings import settings_from_env

    sock = None
    if args.fd is None:  # the port first: a taken one ends here, before any state exists
        sock = bind_listener(args.host, args.port, what="the challenge service")
    app = create_app(settings_from_env())
    if args.ready_file is not None:
        host, port = (args.host, args.port) if sock is None else sock.getsockname()[:2]
        ready = {"pid": os.getpid(), "url": f"http://{host}:{port}"}
        args.ready_file.write_text(json.dumps(ready, sort_keys=True) + "\n", encoding="utf-8")
    debug = logging.getLogger().getEffectiveLevel() <= logging.DEBUG
    serve_asgi(app, sock, fd=args.fd, debug=debug)
    return 0


def call(method: str, url: str, **kwargs: Any) -> Any:
    """One request to the service; a down, wrong or refusing service is one clear line."""
    base = url.split("/v1/")[0].split("/admin/")[0]
    try:
        response = httpx.request(method, url, timeout=30, **kwargs)
    except httpx.HTTPError as exc:
        reason = str(exc) or type(exc).__name__
        raise OperatorError(f"cannot reach the service at {base}: {reason}") from None
    try:
        doc = response.json()
    except ValueError:
        raise OperatorError(
            f"{base} answered HTTP {response.status_code} without JSON:"
            " is it a Hypertrain challenge service?"
        ) from None
    if not response.is_success:
        detail = doc.get("detail", doc) if isinstance(doc, dict) else doc
        code = doc.get("error", "") if isinstance(doc, dict) else ""
        raise OperatorError(
            f"the service refused ({response.status_code}{' ' + code if code else ''}): {detail}"
        )
    return doc


def typed(adapter: TypeAdapter[T], method: str, url: str, **kwargs: Any) -> T:
    """:func:`call`, its answer parsed into the service's shared model (one clear line
    when it does not fit)."""
    doc = call(method, url, **kwargs)
    try:
        return adapter.validate_python(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        raise OperatorError(
            f"{url} answered something unexpected at {where}: {first['msg']}"
        ) from None


def _body(envelope: Envelope, model: type[B]) -> B:
    try:
        return model.model_validate(envelope.body)
    except ValidationError as exc:
        raise OperatorError(
            f"the service's signed {envelope.domain} record is malformed: {exc}"
        ) from None


def _signer(envelope: Any, domain: str, run_id: str) -> str:
    """The verified signer of a record the service published (its signature must hold)."""
    try:
        return open_envelope(envelope, domain=domain, run_id=run_id).signer
    except EnvelopeError as exc:
        raise OperatorError(f"a published {domain} record does not verify: {exc}") from None


def _admin_post(args: argparse.Namespace, path: str, body: dict[str, JsonValue]) -> Envelope:
    token = read_token_file(args.admin_token_file, "--admin-token-file")
    return typed(
        _ENVELOPE,
        "POST",
        args.service_url.rstrip("/") + path,
        json=body,
        headers={"Authorization": f"Bearer {token.reveal()}"},
    )


def _create_run(args: argparse.Namespace) -> int:
    manifest = manifest_document(args.manifest.read_bytes())
    envelope = _admin_post(args, "/admin/v1/runs", {"manifest": manifest})
    signed = _body(envelope, ManifestRecord).manifest
    run_id, coordinator, base = signed.run_id, envelope.signer, args.service_url.rstrip("/")
    if args.coordinator_out is not None:
        args.coordinator_out.write_text(coordinator + "\n", encoding="utf-8")
    steps = next_steps(base, run_id, coordinator, signed.data.dataset_root)
    sys.stdout.write(steps + referee_note(len(signed.dispute.referees)))
    return 0


def next_steps(base: str, run_id: str, coordinator: str, dataset_root: str) -> str:
    """What create-run prints: the run, its coordinator and what to start next."""
    return (
        f"created run {run_id}\n"
        f"coordinator  {coordinator}\n"
        f"manifest     {base}/v1/runs/{run_id}/manifest (signed by the coordinator)\n"
        f"dashboard    {base}/dashboard/?run={run_id}\n"
        "next steps (docs/operator.md):\n"
        f"  1. start a relay that trusts the coordinator: hypertrain relay serve --run-id {run_id}"
        f" --coordinator {coordinator} ...\n"
        f"  2. publish the dataset (root {dataset_root[:16]}…):"
        " hypertrain data serve --dataset-dir DIR\n"
        "  3. start auditors (before islands join: a join waits for an auditor's check):"
        f" hypertrain auditor run --follow --service-url {base} --run-id {run_id} ...\n"
        f"  4. islands join: hypertrain-miner join --service-url {base} --run-id {run_id}"
        f" --coordinator {coordinator} ...\n"
        "  5. start the tape witnesses named in HYPERTRAIN_WITNESS_HOTKEYS (no round is paid"
        " before they agree with its tape), each under its own key:"
        f" hypertrain aggregator witness --follow --service-url {base} --run-id {run_id} ...\n"
        f"  6. start the aggregator with the admin token; it publishes the genesis model and"
        f" opens round 0: hypertrain aggregator run --follow --service-url {base} --run-id {run_id}"
        " --admin-token-file FILE ...\n"
    )


def referee_note(referees: int) -> str:
    """A warning when the signed manifest names no referee (docs/operator.md, Disputes)."""
    if referees:
        return ""
    return (
        "note: the manifest's dispute.referees is empty, so a dispute that reaches one"
        " operation is upheld at its deadline; name a referee (hypertrain referee serve) in"
        " the manifest of a run where islands may dispute\n"
    )


def _open_round(args: argparse.Namespace) -> int:
    body = {"start_model_sha256": args.start_model_sha256, "start_model_url": args.start_model_url}
    envelope = _admin_post(args, f"/admin/v1/runs/{args.run_id}/rounds", body)
    b = _body(envelope, RoundOpen)
    sys.stdout.write(
        f"opened round {b.round} of {args.run_id} at beacon round {b.beacon_round}:"
        f" {len(b.roster)} islands, commits until beacon round {b.commit_deadline_round}\n"
    )
    return 0


def _status(args: argparse.Namespace) -> int:
    base = args.service_url.rstrip("/")
    deadline = time.monotonic() + args.wait_s
    while True:
        try:
            if args.ready_file is not None:
                _check_ready(args.ready_file, base)
            health = typed(_HEALTH, "GET", f"{base}/health")
            typed(_VERSION, "GET", f"{base}/version")  # a Hypertrain service, not just any
            break
        except OperatorError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)
    runs = typed(_RUNS, "GET", f"{base}/v1/runs")
    names = ", ".join(r.run_id for r in runs)
    up = json.dumps(health.model_dump(mode="json", exclude_none=True), sort_keys=True)
    sys.stdout.write(f"service {base} is up: {up}; runs: {names or 'none'}\n")
    return 0


class NotServingError(OperatorError):
    """The ``challenge serve`` process of a ready file is gone or serves another address
    (waited for like a service that does not answer yet: a rerun's new process may not
    have replaced the last run's file yet)."""


def _check_ready(path: Path, base: str) -> None:
    """The serve process that wrote ``path`` is alive and bound ``base``'s port.

    A missing file, a dead process or another address raise (and are waited for until
    ``--wait-s`` ends): whatever answers at ``base`` then is not the service this command
    was asked about.
    """
    try:
        ready = json.loads(path.read_text(encoding="utf-8"))
        pid, url = int(ready["pid"]), str(ready["url"])
    except FileNotFoundError:
        raise OperatorError(
            f"{path} was not written: the service did not bind its port (is the port taken"
            " by another process? see the service's log)"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NotServingError(f"{path} is not a ready file of `challenge serve`: {exc}") from None
    if httpx.URL(url).port != httpx.URL(base).port:
        raise NotServingError(f"{path}: that service serves {url}, not {base}")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise NotServingError(
            f"the service that wrote {path} (pid {pid}) is not running: see its log;"
            f" whatever answers at {base} is another process"
        ) from None
    except PermissionError:
        pass  # alive, under another user


def _check_selection(args: argparse.Namespace) -> int:
    base = args.service_url.rstrip("/")
    manifest_env = call("GET", f"{base}/v1/runs/{args.run_id}/manifest")
    manifest = manifest_of(manifest_env)
    coordinator = _signer(manifest_env, "manifest", args.run_id)
    detail = typed(_DETAIL, "GET", f"{base}/v1/runs/{args.run_id}/rounds/{args.round}")
    selector = detail.selection_beacon
    if selector is None:
        raise ValueError(f"round {args.round} has no audit selection yet")
    committed = {_signer(c, "commit", args.run_id): False for c in detail.commits}
    committed.update(detail.probation)
    expected = select_audits(
        run_id=args.run_id,
        round_index=args.round,
        beacon_round=selector.round,
        randomness_hex=selector.randomness,
        committed=committed,
        rate=manifest.audit.rate,
        segments_per_audit=manifest.audit.segments,
        num_segments=manifest.round.num_segments,
    )
    mine = [(a.hotkey, list(a.segments)) for a in expected]
    for a in detail.assignments:
        if _signer(a, "audit-assignment", args.run_id) != coordinator:
            raise OperatorError(f"an audit assignment is signed by {a.signer}, not the coordinator")
    assigned = [_body(a, AuditAssignment) for a in detail.assignments]
    theirs = [(a.hotkey, list(a.segments)) for a in assigned]
    sys.stdout.write(f"beacon round {selector.round}: {len(mine)} islands selected\n")
    if mine != theirs:
        sys.stdout.write("MISMATCH: the published selection differs from the recomputed one\n")
        return 1
    sys.stdout.write("OK: published selection matches\n")
    return 0


def manifest_of(envelope: object) -> RunManifest:
    """The manifest inside a served envelope (checked by its signature)."""
    return RunManifest.model_validate(manifest_document(json.dumps(envelope).encode("utf-8")))


_HONEYPOT_COLUMNS = (
    "role",
    "strategy",
    "hotkeys",
    "rounds_run",
    "audited",
    "caught",
    "missed",
    "false_positives",
    "verdicts",
    "disputes_won",
    "disputes_lost",
)


def _honeypots(args: argparse.Namespace) -> int:
    """Per strategy: rounds run, audited, caught, missed, false positives, disputes."""
    url = f"{args.service_url.rstrip('/')}/v1/runs/{args.run_id}/honeypots"
    rows = typed(_HONEYPOTS, "GET", url).table
    cells = [{k: "-" if v is None else str(v) for k, v in r.model_dump().items()} for r in rows]
    lines = [_HONEYPOT_COLUMNS, *[tuple(c[name] for name in _HONEYPOT_COLUMNS) for c in cells]]
    widths = [max(len(line[i]) for line in lines) for i in range(len(_HONEYPOT_COLUMNS))]
    for line in lines:
        sys.stdout.write("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)) + "\n")
    return 0
