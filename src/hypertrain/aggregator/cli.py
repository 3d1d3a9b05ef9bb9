"""``hypertrain aggregator``: genesis, merge, run (--follow), verify-tape, rollback, witness."""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from hypertrain.aggregator.blobs import RelayBlobs
from hypertrain.aggregator.errors import AggregatorError
from hypertrain.aggregator.heldout import open_heldout
from hypertrain.aggregator.rebase import rollback
from hypertrain.aggregator.records import run_manifest
from hypertrain.aggregator.runner import Aggregator, GenesisModel, follow, genesis
from hypertrain.aggregator.sketch import SketchCache
from hypertrain.aggregator.tape import Tape, decode_tape
from hypertrain.aggregator.verify import verify_tape
from hypertrain.aggregator.witness import Witness
from hypertrain.aggregator.witness import follow as follow_witness
from hypertrain.api.client import ChallengeClient
from hypertrain.protocol.cliargs import add_relay_url, add_service_url
from hypertrain.protocol.identity import load_key_file
from hypertrain.protocol.keyargs import add_wallet_flags, key_from_args
from hypertrain.protocol.manifest import RunManifest
from hypertrain.relay.client import RelayClient
from hypertrain.rolekit import PEER_MAX_DELAY_S, when_up, write_line

RELAY_TIMEOUT_S = 120.0  # model and outer-state blobs can be large
START_MAX_DELAY_S = PEER_MAX_DELAY_S  # the longest wait for an absent service (rolekit)


def _emit(event: dict[str, Any]) -> None:
    write_line({"role": "aggregator", **event})


def manifest_when_up(
    fetch: Callable[[], RunManifest],
    emit: Callable[[dict[str, Any]], None],
    stop: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], None] = time.sleep,
) -> RunManifest | None:
    """The run's manifest (``fetch``: :func:`verified_manifest`), waiting (with backoff)
    while the service cannot be reached or fails (5xx): a role (re)started while its
    service is away waits for it instead of exiting (``rolekit.when_up``, the wait of
    every long-lived role). None once ``stop()`` (its stop signal) says so. A refusal (4xx:
    an unknown run, a bad token) or a manifest that does not verify (one naming no
    coordinator among them) is a configuration error and raises."""

    def waiting(exc: Exception, delay: float) -> None:
        emit({"event": "service_unreachable", "detail": str(exc)[:300], "retry_in_s": delay})

    return when_up(fetch, on_wait=waiting, stop=stop, sleep=sleep)


def verified_manifest(service: ChallengeClient, args: argparse.Namespace) -> RunManifest:
    """The run manifest through :mod:`hypertrain.evidence` (``--coordinator`` pins its
    signer; without it the manifest must name one): a run without a coordinator is
    refused, a configuration error (exit 1)."""
    return run_manifest(service, args.run_id, args.coordinator or None)


def _coordinator(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--coordinator", default="",
        help="pinned coordinator SS58 (recommended); without it the manifest's coordinator"
        " field is used, and a run that names none is refused",
    )  # fmt: skip


def _token(path: Path | None) -> str | None:
    return path.read_text(encoding="utf-8").strip() if path else None


def _common(p: argparse.ArgumentParser, *, service: bool = True) -> None:
    if service:
        add_service_url(p, required=True)
        p.add_argument("--worker-token-file", type=Path, help="file holding the worker token")
    add_relay_url(p, required=True)
    p.add_argument("--run-id", required=True, help="run identifier")
    _coordinator(p)
    add_wallet_flags(p, what="aggregator hotkey")
    p.add_argument("--state-dir", type=Path, default=Path("aggregator-state"),
                   help="directory for the blob cache, tapes and merged-update list")  # fmt: skip


def _dataset(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset-dir", type=Path, help="the run's dataset: post each new model's held-out loss"
    )


def _genesis(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--genesis-model", type=Path,
        help="round 0's model, for a run with a warm start (the file hypertrain run"
        " warm-start writes)",
    )  # fmt: skip


def genesis_source(args: argparse.Namespace) -> GenesisModel | None:
    """Round 0's model as ``--genesis-model`` gives it, or None (the seed's model)."""
    path: Path | None = args.genesis_model
    return None if path is None else (lambda manifest: path.read_bytes())


def register(subparsers: Any) -> None:
    group = subparsers.add_parser("aggregator", help="merge rounds, verify merge tapes")
    sub = group.add_subparsers(dest="command", metavar="COMMAND", required=True)

    gen = sub.add_parser(
        "genesis", help="publish the round-0 model (the seed's, or the warm start's)"
    )
    _common(gen)
    gen.add_argument("--admin-token-file", type=Path, help="admin token: also open round 0")
    _genesis(gen)
    gen.set_defaults(func=cmd_genesis)

    one = sub.add_parser("merge", help="merge one round that is in the merge phase")
    _common(one)
    one.add_argument("--round", type=int, required=True, help="round index to merge")
    _dataset(one)
    one.set_defaults(func=cmd_merge)

    run = sub.add_parser("run", help="merge waiting rounds (once, or continuously)")
    _common(run)
    run.add_argument("--admin-token-file", type=Path,
                     help="admin token: open round 0 and every next round")  # fmt: skip
    run.add_argument("--follow", action="store_true", help="keep polling the service")
    run.add_argument("--poll-s", type=float, default=1.0, help="seconds between polls (default 1)")
    run.add_argument("--max-rounds", type=int, help="stop after this many merges")
    run.add_argument("--last-round", type=int, help="open no round after this index")
    _dataset(run)
    _genesis(run)
    run.set_defaults(func=cmd_run)

    ver = sub.add_parser("verify-tape", help="recompute a merge and compare its bytes")
    ver.add_argument("tape", help="tape SHA-256 on the relay, or a tape file")
    add_relay_url(ver, "relay base URL to fetch blobs from", required=True)
    ver.add_argument("--cache-dir", type=Path, help="blob cache (default: a temporary one)")
    ver.set_defaults(func=cmd_verify)

    wit = sub.add_parser("witness", help="recompute each merged round; post signed attestations")
    add_service_url(wit, required=True)
    add_relay_url(wit, "relay base URL to fetch blobs from", required=True)
    wit.add_argument("--run-id", required=True, help="run identifier")
    _coordinator(wit)
    add_wallet_flags(wit, what="witness hotkey (never the aggregator's)")
    wit.add_argument("--state-dir", type=Path, default=Path("witness-state"),
                     help="directory for the blob cache")  # fmt: skip
    wit.add_argument("--follow", action="store_true", help="keep polling the service")
    wit.add_argument("--poll-s", type=float, default=1.0, help="seconds between polls (default 1)")
    wit.set_defaults(func=cmd_witness)

    rb = sub.add_parser("rollback", help="recompute a round without a faulty island's update")
    rb.add_argument("tape", help="tape SHA-256 on the relay, or a tape file")
    rb.add_argument("--hotkey", required=True, help="SS58 of the island whose fault was proven")
    add_relay_url(rb, required=True)
    rb.add_argument("--out", type=Path, required=True, help="write the new tape here")
    rb.add_argument("--key-file", type=Path, help="hotkey file: publish the new blobs")
    rb.add_argument("--expiry-round", type=int, default=0, help="envelope expiry for uploads")
    rb.add_argument("--cache-dir", type=Path, help="blob cache (default: a temporary one)")
    rb.set_defaults(func=cmd_rollback)


def _aggregator(args: argparse.Namespace, admin: bool = False) -> Aggregator:
    key = key_from_args(args)
    service = ChallengeClient(
        args.service_url,
        worker_token=_token(args.worker_token_file),
        admin_token=_token(getattr(args, "admin_token_file", None)) if admin else None,
    )
    relay = RelayClient(args.relay_url, key, args.run_id, timeout_s=RELAY_TIMEOUT_S)
    store = RelayBlobs(relay, args.state_dir / "blobs", lambda: service.beacon_round() + 10)
    agg = Aggregator(service, store, key, args.run_id, args.state_dir, _emit)
    agg.coordinator = args.coordinator or None
    if getattr(args, "dataset_dir", None) is not None:
        if getattr(args, "follow", False):  # a long-lived role waits for its service
            manifest = manifest_when_up(partial(verified_manifest, service, args), _emit)
            assert manifest is not None  # no stop signal is installed yet: it waits until up
        else:  # a one-shot command fails at once, naming the service it cannot reach
            manifest = verified_manifest(service, args)
        agg.heldout = open_heldout(args.dataset_dir, manifest)
    return agg


def cmd_genesis(args: argparse.Namespace) -> int:
    agg = _aggregator(args, admin=True)
    manifest = verified_manifest(agg.service, args)
    sha, url = genesis(manifest, agg.store, genesis_source(args))
    _emit({"event": "genesis", "round": 0, "model": sha, "url": url})
    if args.admin_token_file:
        agg.service.open_round(args.run_id, sha, url)
        _emit({"event": "opened", "round": 0, "phase": "train", "model": sha})
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    agg = _aggregator(args)
    agg.merge_round(verified_manifest(agg.service, args), args.round)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    agg = _aggregator(args, admin=True)
    agg.last_round = args.last_round
    agg.genesis_model = genesis_source(args)
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    if not args.follow:
        agg.step(verified_manifest(agg.service, args), args.admin_token_file is not None)
        return 0
    fetch = partial(verified_manifest, agg.service, args)
    if manifest_when_up(fetch, _emit, lambda: bool(stopping)) is None:
        return 0  # stopped while waiting for the service
    follow(agg, open_rounds=args.admin_token_file is not None, poll_s=args.poll_s,
           max_rounds=args.max_rounds, stop=lambda: bool(stopping))  # fmt: skip
    return 0


def _load_tape(ref: str, relay: RelayBlobs) -> Tape:
    path = Path(ref)
    if path.is_file():
        return decode_tape(path.read_bytes())
    if len(ref) != 64 or any(c not in "0123456789abcdef" for c in ref):
        raise AggregatorError(f"{ref!r} is neither a file nor a 64-hex tape hash")
    return decode_tape(relay.get(ref))


def _relay_blobs(args: argparse.Namespace, key_file: Path | None = None) -> RelayBlobs:
    key = load_key_file(key_file) if key_file else None
    cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="hypertrain-agg-"))
    expiry = getattr(args, "expiry_round", 0)
    relay = RelayClient(args.relay_url, key, "unknown", timeout_s=RELAY_TIMEOUT_S)
    return RelayBlobs(relay, cache, lambda: expiry)


def cmd_verify(args: argparse.Namespace) -> int:
    blobs = _relay_blobs(args)
    tape = _load_tape(args.tape, blobs)
    report = verify_tape(tape, blobs)
    published = blobs.get(tape.new_model_sha256) == report.recomputed.model_blob
    if report.identical and published:
        sys.stdout.write(f"identical: round {tape.round} model {tape.new_model_sha256}\n")
        return 0
    where = report.first_difference or "the relay's model blob differs from the recomputed one"
    sys.stdout.write(f"DIFFERENT: {where}\n")
    return 1


def _emit_witness(event: dict[str, Any]) -> None:
    _emit({**event, "role": "witness"})


def cmd_witness(args: argparse.Namespace) -> int:
    """A tape witness under its own hotkey (never the aggregator's: the service refuses)."""
    key = key_from_args(args)
    service = ChallengeClient(args.service_url)
    relay = RelayClient(args.relay_url, key, args.run_id, timeout_s=RELAY_TIMEOUT_S)
    blobs = RelayBlobs(relay, args.state_dir / "blobs")
    witness = Witness(service, blobs, key, args.run_id, _emit_witness)
    witness.coordinator = args.coordinator or None
    witness.sketches = SketchCache(args.run_id, args.state_dir / "sketches")  # kept on restart
    if not args.follow:
        witness.step(verified_manifest(service, args))
        return 0
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    fetch = partial(verified_manifest, service, args)
    if manifest_when_up(fetch, _emit_witness, lambda: bool(stopping)) is None:
        return 0  # stopped while waiting for the service
    follow_witness(witness, poll_s=args.poll_s, stop=lambda: bool(stopping))
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    blobs = _relay_blobs(args, args.key_file)
    tape = _load_tape(args.tape, blobs)
    blobs.relay.run_id = tape.run_id
    result = rollback(tape, args.hotkey, blobs)
    args.out.write_bytes(result.tape.to_bytes())
    if args.key_file:
        blobs.put(result.outer_blob, kind="outer_state", round=tape.round)
        blobs.put(result.model_blob, kind="model", round=tape.round)
        blobs.put(result.tape.to_bytes(), kind="tape", round=tape.round)
    sys.stdout.write(
        f"rolled back {args.hotkey} from round {tape.round}: model {result.tape.new_model_sha256}"
        f" outer {result.tape.new_outer_state_sha256} tape {result.tape.sha256()}\n"
    )
    return 0
