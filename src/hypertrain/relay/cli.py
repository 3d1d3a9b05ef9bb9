"""``hypertrain relay``: run a relay, or put/get blobs by hand.

``serve`` runs the service under uvicorn; ``put`` uploads a file with a wallet key
and prints its SHA-256; ``get`` downloads a blob, verifying its hash.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from hypertrain.protocol.cliargs import add_relay_url
from hypertrain.protocol.keyargs import add_wallet_flags, key_from_args
from hypertrain.protocol.listen import bind_listener, serve_asgi
from hypertrain.relay.settings import GIB, RelaySettings

KINDS = ["update", "checkpoint", "model", "outer_state", "tape", "other"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("relay", help="content-addressed blob relay")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_serve(sub)
    _add_put(sub)
    _add_get(sub)


def _add_serve(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run a relay service")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind")
    serve.add_argument("--port", type=int, default=8470, help="port to bind")
    serve.add_argument(
        "--fd",
        type=int,
        help="serve on this inherited listening socket instead of --host/--port",
    )
    serve.add_argument(
        "--storage", required=True, help="blob directory, or an fsspec URL (s3://bucket/prefix)"
    )
    serve.add_argument(
        "--state-dir",
        type=Path,
        help="local dir for replay/quota databases (default STORAGE/state)",
    )
    serve.add_argument("--upstream", help="upstream relay URL to forward uploads to and fill from")
    serve.add_argument(
        "--run-id", action="append", default=[],
        help="accept uploads for this run or competition id (repeat for several; none: any)",
    )  # fmt: skip
    serve.add_argument("--allow-list", type=Path, help="JSON list of SS58 hotkeys, or a snapshot")
    serve.add_argument("--metagraph-url", help="URL of /v1/metagraph/latest to check hotkeys")
    serve.add_argument(
        "--coordinator", action="append", default=[], help="coordinator SS58 (repeatable)"
    )
    serve.add_argument("--max-blob-bytes", type=int, default=GIB, help="largest single blob")
    serve.add_argument(
        "--max-round-bytes", type=int, default=4 * GIB, help="bytes per hotkey per round"
    )
    serve.add_argument("--beacon-genesis-unix", type=int, help="beacon genesis (default quicknet)")
    serve.add_argument("--beacon-period-s", type=int, help="beacon period (default quicknet)")
    serve.add_argument(
        "--beacon-info-file", type=Path, help="chain info JSON (genesis_time, period) to follow"
    )
    serve.set_defaults(func=_serve)


def _add_put(sub: Any) -> None:
    put = sub.add_parser("put", help="upload a file and print its SHA-256")
    put.add_argument("file", type=Path, help="file to upload")
    add_relay_url(put, required=True)
    put.add_argument("--run-id", required=True, help="run the upload belongs to")
    put.add_argument("--round", type=int, required=True, help="training round")
    put.add_argument("--kind", default="other", choices=KINDS, help="blob kind")
    put.add_argument("--expiry-round", type=int, required=True, help="envelope expiry beacon round")
    add_wallet_flags(put)
    put.set_defaults(func=_put)


def _add_get(sub: Any) -> None:
    get = sub.add_parser("get", help="download a blob, verifying its hash")
    get.add_argument("sha256", help="blob hash")
    add_relay_url(get, required=True)
    get.add_argument("--out", type=Path, required=True, help="where to write the blob")
    get.set_defaults(func=_get)


def settings_from_args(args: argparse.Namespace) -> RelaySettings:
    """Build settings from ``serve`` flags."""
    state_dir = args.state_dir
    if state_dir is None:
        if "://" in args.storage:
            raise ValueError("--state-dir is required when --storage is a URL")
        state_dir = Path(args.storage) / "state"
    beacon: dict[str, int] = {}
    info_file = getattr(args, "beacon_info_file", None)
    if info_file is not None:
        try:
            info = json.loads(info_file.read_text(encoding="utf-8"))
            beacon = {
                "beacon_genesis_unix": int(info["genesis_time"]),
                "beacon_period_s": int(info["period"]),
            }
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"--beacon-info-file {info_file}: not chain info ({exc})") from None
    if args.beacon_genesis_unix is not None:
        beacon["beacon_genesis_unix"] = args.beacon_genesis_unix
    if args.beacon_period_s is not None:
        beacon["beacon_period_s"] = args.beacon_period_s
    return RelaySettings(
        storage=args.storage,
        state_dir=state_dir,
        run_id=args.run_id[0] if args.run_id else None,
        run_ids=frozenset(args.run_id),
        upstream=args.upstream,
        allow_list=args.allow_list,
        metagraph_url=args.metagraph_url,
        coordinators=frozenset(args.coordinator),
        max_blob_bytes=args.max_blob_bytes,
        max_round_bytes=args.max_round_bytes,
        **beacon,
    )


def _serve(args: argparse.Namespace) -> int:
    from hypertrain.relay.app import create_app

    sock = None
    if args.fd is None:  # the port first: a taken one ends here, before any state exists
        sock = bind_listener(args.host, args.port, what="the relay")
    app = create_app(settings_from_args(args))
    debug = logging.getLogger().getEffectiveLevel() <= logging.DEBUG
    serve_asgi(app, sock, fd=args.fd, debug=debug)
    return 0


def _put(args: argparse.Namespace) -> int:
    from hypertrain.relay.client import RelayClient

    key = key_from_args(args)
    with RelayClient(args.relay_url, key, args.run_id) as client:
        sha256 = client.put(
            args.file, kind=args.kind, round=args.round, expiry_round=args.expiry_round
        )
    sys.stdout.write(sha256 + "\n")
    return 0


def _get(args: argparse.Namespace) -> int:
    from hypertrain.relay.client import RelayClient

    with RelayClient(args.relay_url, None, "none") as client:
        client.get_to_file(args.sha256, args.out)
    sys.stdout.write(f"{args.out}\n")
    return 0
