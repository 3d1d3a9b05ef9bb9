"""``hypertrain beacon``: check drand beacons, do round arithmetic, run the local beacon.

``verify ROUND SIGNATURE_HEX`` prints the randomness or exactly why the signature
fails; ``time ROUND`` and ``round-at TIME`` convert between rounds and time;
``get ROUND|latest`` fetches a verified beacon from endpoints; ``serve`` runs the
drand-compatible local beacon for the devnet. Quicknet is the default chain;
``--chain-info FILE`` (drand ``/info`` JSON) selects another.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from hypertrain.beacon.chain import QUICKNET, ChainInfo, load_chain_info
from hypertrain.beacon.client import BeaconClient
from hypertrain.beacon.errors import BeaconError
from hypertrain.beacon.local import DEFAULT_BEACON_ID, LocalBeacon, write_json_atomic
from hypertrain.beacon.server import LocalBeaconServer
from hypertrain.beacon.timing import round_at, time_of_round
from hypertrain.beacon.verify import parse_hex, verify_beacon
from hypertrain.protocol.listen import ensure_port_free

logger = logging.getLogger(__name__)

QUICKNET_ENDPOINT = "https://api.drand.sh"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "beacon",
        help="drand beacons: verify, round arithmetic, fetch, local beacon",
        description="Verify drand beacons (quicknet by default), convert between rounds "
        "and time, fetch verified beacons, and run the local devnet beacon.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _register_checks(sub)
    _register_get(sub)
    _register_serve(sub)


def _register_checks(sub: Any) -> None:
    verify = sub.add_parser("verify", help="verify one beacon signature and print its randomness")
    verify.add_argument("round", type=int, help="the beacon round number")
    verify.add_argument("signature", help="the round's signature, hex (96 hex digits)")
    _chain_flag(verify)
    verify.set_defaults(func=_verify)

    when = sub.add_parser("time", help="print when a round is published")
    when.add_argument("round", type=int, help="the beacon round number (>= 1)")
    _chain_flag(when)
    when.set_defaults(func=_time)

    at = sub.add_parser("round-at", help="print the latest round published at a given time")
    at.add_argument("time", help="unix seconds, ISO 8601 (e.g. 2025-01-01T00:00:00Z) or 'now'")
    _chain_flag(at)
    at.set_defaults(func=_round_at)


def _register_get(sub: Any) -> None:
    get = sub.add_parser("get", help="fetch and verify a beacon from drand endpoints")
    get.add_argument("round", help="a round number, or 'latest'")
    get.add_argument(
        "--endpoint",
        action="append",
        metavar="URL",
        help=f"drand HTTP base URL; repeat for fallbacks (default {QUICKNET_ENDPOINT})",
    )
    get.add_argument(
        "--cache", type=Path, metavar="FILE", help="SQLite file caching verified rounds"
    )
    get.add_argument(
        "--timeout-s", type=float, default=5.0, metavar="S", help="per-request timeout (default 5)"
    )
    _chain_flag(get)
    get.set_defaults(func=_get)


def _register_serve(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run the drand-compatible local beacon (devnet)")
    serve.add_argument(
        "--host", default="127.0.0.1", metavar="ADDR", help="address to bind (default loopback)"
    )
    serve.add_argument(
        "--port", type=int, default=8081, metavar="P", help="TCP port (default 8081; 0 = any free)"
    )
    serve.add_argument(
        "--period-s",
        type=int,
        default=1,
        metavar="S",
        help="whole seconds between rounds (default 1)",
    )
    serve.add_argument(
        "--key-file",
        type=Path,
        required=True,
        metavar="FILE",
        help="BLS key JSON; created (mode 0600) if absent",
    )
    serve.add_argument(
        "--state-dir",
        type=Path,
        required=True,
        metavar="DIR",
        help="directory keeping the chain (genesis time)",
    )
    serve.add_argument(
        "--beacon-id",
        default=DEFAULT_BEACON_ID,
        metavar="ID",
        help=f"beacon id (default {DEFAULT_BEACON_ID})",
    )
    serve.add_argument(
        "--info-out", type=Path, metavar="FILE", help="also write the chain info JSON here"
    )
    serve.add_argument(
        "--ready-file",
        type=Path,
        metavar="FILE",
        help="write {url, chain_info} here once the port is bound",
    )
    serve.set_defaults(func=_serve)


def _chain_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--chain-info",
        type=Path,
        metavar="FILE",
        help="drand /info JSON of the chain to use (default: drand quicknet)",
    )


def _chain(args: argparse.Namespace) -> ChainInfo:
    return QUICKNET if args.chain_info is None else load_chain_info(args.chain_info)


def _verify(args: argparse.Namespace) -> int:
    chain = _chain(args)
    try:
        randomness = verify_beacon(chain, args.round, parse_hex(args.signature, "signature"))
    except BeaconError as exc:
        sys.stdout.write(f"REJECTED ({exc.reason}): {exc.detail}\n")
        return 1
    sys.stdout.write(f"{randomness.hex()}\n")
    return 0


def _iso(unix_time: float) -> str:
    return dt.datetime.fromtimestamp(unix_time, dt.UTC).isoformat().replace("+00:00", "Z")


def _time(args: argparse.Namespace) -> int:
    when = time_of_round(_chain(args), args.round)
    sys.stdout.write(f"{when} {_iso(when)}\n")
    return 0


def _parse_time(text: str) -> float:
    if text == "now":
        return dt.datetime.now(dt.UTC).timestamp()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"time {text!r} is neither unix seconds nor ISO 8601") from exc
    if parsed.tzinfo is None:
        raise ValueError(f"time {text!r} has no timezone; add Z or an offset")
    return parsed.timestamp()


def _round_at(args: argparse.Namespace) -> int:
    sys.stdout.write(f"{round_at(_chain(args), _parse_time(args.time))}\n")
    return 0


def _get(args: argparse.Namespace) -> int:
    endpoints = args.endpoint or [QUICKNET_ENDPOINT]
    with BeaconClient(endpoints, _chain(args), args.cache, timeout_s=args.timeout_s) as client:
        beacon = client.latest() if args.round == "latest" else client.get(_round(args.round))
    sys.stdout.write(json.dumps(beacon.to_json(), sort_keys=True) + "\n")
    return 0


def _round(text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"round {text!r} is neither a positive integer nor 'latest'")
    return int(text)


def _serve(args: argparse.Namespace) -> int:
    # the port first: a taken one ends here, before the key or state directory is created
    ensure_port_free(args.host, args.port, what="the local beacon")
    beacon = LocalBeacon.open(
        args.key_file, args.state_dir, period_s=args.period_s, beacon_id=args.beacon_id
    )
    server = LocalBeaconServer(beacon, args.host, args.port)
    info = beacon.chain.to_json()
    if args.info_out is not None:
        write_json_atomic(args.info_out, info)
    if args.ready_file is not None:
        write_json_atomic(args.ready_file, {"url": server.url, "chain_info": info})
    signal.signal(signal.SIGTERM, _exit_on_signal)
    sys.stdout.write(f"local beacon {beacon.chain.chain_hash_hex} serving at {server.url}\n")
    sys.stdout.flush()
    logger.info("period %d s, genesis %d", beacon.chain.period_s, beacon.chain.genesis_time)
    server.serve_forever()
    return 0


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(0)
