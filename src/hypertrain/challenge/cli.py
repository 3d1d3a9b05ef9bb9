"""``hypertrain challenge``: serve the service and drive it as an operator.

``serve`` runs uvicorn on the app built from the environment (docs/operator.md);
``create-run`` and ``open-round`` call the admin routes with the admin token read
from a file (never from the command line); ``check-selection`` recomputes a round's
audit selection from its public data and compares it with the published one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import httpx

from hypertrain.challenge.selection import select_audits
from hypertrain.challenge.settings import read_token_file
from hypertrain.protocol.canonical import parse_json
from hypertrain.protocol.manifest import RunManifest


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("challenge", help="the challenge service (coordinator)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    serve = sub.add_parser("serve", help="run the service (settings from the environment)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind")
    serve.add_argument("--port", type=int, default=8000, help="port to bind")
    serve.set_defaults(func=_serve)

    create = sub.add_parser("create-run", help="create a run from a manifest JSON file")
    _client_args(create)
    create.add_argument("--manifest", type=Path, required=True, help="run manifest JSON file")
    create.set_defaults(func=_create_run)

    open_round = sub.add_parser("open-round", help="open the next round of a run")
    _client_args(open_round)
    open_round.add_argument("--run-id", required=True, help="the run")
    open_round.add_argument("--start-model-sha256", help="start model hash (default: merged)")
    open_round.add_argument("--start-model-url", help="where the start model can be fetched")
    open_round.set_defaults(func=_open_round)

    check = sub.add_parser("check-selection", help="recompute a round's audit selection")
    check.add_argument("--url", default="http://127.0.0.1:8000", help="service base URL")
    check.add_argument("--run-id", required=True, help="the run")
    check.add_argument("--round", type=int, required=True, help="the round index")
    check.set_defaults(func=_check_selection)

    pots = sub.add_parser("honeypots", help="print the revealed honeypots' per-strategy table")
    pots.add_argument("--url", default="http://127.0.0.1:8000", help="service base URL")
    pots.add_argument("--run-id", required=True, help="the run")
    pots.set_defaults(func=_honeypots)


def _client_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="service base URL")
    parser.add_argument(
        "--admin-token-file", type=Path, required=True, help="file holding the admin token"
    )


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from hypertrain.challenge.app import create_app
    from hypertrain.challenge.settings import settings_from_env

    uvicorn.run(create_app(settings_from_env()), host=args.host, port=args.port)
    return 0


def _admin_post(args: argparse.Namespace, path: str, body: dict[str, Any]) -> int:
    token = read_token_file(args.admin_token_file, "--admin-token-file")
    response = httpx.post(
        args.url.rstrip("/") + path,
        json=body,
        headers={"Authorization": f"Bearer {token.reveal()}"},
        timeout=30,
    )
    sys.stdout.write(json.dumps(response.json(), indent=2) + "\n")
    return 0 if response.is_success else 1


def _create_run(args: argparse.Namespace) -> int:
    manifest = parse_json(args.manifest.read_bytes())
    return _admin_post(args, "/admin/v1/runs", {"manifest": manifest})


def _open_round(args: argparse.Namespace) -> int:
    body = {"start_model_sha256": args.start_model_sha256, "start_model_url": args.start_model_url}
    return _admin_post(args, f"/admin/v1/runs/{args.run_id}/rounds", body)


def _check_selection(args: argparse.Namespace) -> int:
    base = args.url.rstrip("/")
    manifest_env = httpx.get(f"{base}/v1/runs/{args.run_id}/manifest", timeout=30).json()
    manifest = RunManifest.model_validate(manifest_env["body"]["manifest"])
    detail = httpx.get(f"{base}/v1/runs/{args.run_id}/rounds/{args.round}", timeout=30).json()
    selector = detail.get("selection_beacon")
    if selector is None:
        raise ValueError(f"round {args.round} has no audit selection yet")
    committed = {c["signer"]: False for c in detail["commits"]}
    committed.update(detail["probation"])
    expected = select_audits(
        run_id=args.run_id,
        round_index=args.round,
        beacon_round=selector["round"],
        randomness_hex=selector["randomness"],
        committed=committed,
        rate=manifest.audit.rate,
        segments_per_audit=manifest.audit.segments,
        num_segments=manifest.round.num_segments,
    )
    mine = [(a.hotkey, list(a.segments)) for a in expected]
    theirs = [(a["body"]["hotkey"], a["body"]["segments"]) for a in detail["assignments"]]
    sys.stdout.write(f"beacon round {selector['round']}: {len(mine)} islands selected\n")
    if mine != theirs:
        sys.stdout.write("MISMATCH: the published selection differs from the recomputed one\n")
        return 1
    sys.stdout.write("OK: published selection matches\n")
    return 0


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
    resp = httpx.get(f"{args.url.rstrip('/')}/v1/runs/{args.run_id}/honeypots", timeout=30)
    if not resp.is_success:
        sys.stderr.write(f"{resp.status_code}: {resp.text[:300]}\n")
        return 1
    rows = resp.json()["table"]
    lines = [
        _HONEYPOT_COLUMNS,
        *[tuple(str(r.get(c, "-")) for c in _HONEYPOT_COLUMNS) for r in rows],
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(_HONEYPOT_COLUMNS))]
    for line in lines:
        sys.stdout.write("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)) + "\n")
    return 0
