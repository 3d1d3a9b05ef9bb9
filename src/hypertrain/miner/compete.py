"""``hypertrain-miner compete``: commit a model, then upload and reveal it, then watch;
``best`` downloads the current winner (:mod:`hypertrain.miner.best`).

Commit first: the signed commitment ``H(model hash, hotkey)`` is recorded at the
service's current beacon round, and that round (not the upload time) orders the
submission. Then ``upload`` puts every file on the relay and signs the reveal (the
file list the model hash covers). The model directory is checked against the
competition's spec before anything is sent, with the same checks evaluators run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from hypertrain.api.competition import CompetitionClient
from hypertrain.competition.checks import check_directory
from hypertrain.competition.messages import (
    COMMIT_DOMAIN,
    REVEAL_DOMAIN,
    CommitAccepted,
    CompeteCommit,
    CompeteReveal,
    RevealAccepted,
)
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.competition.submission import commitment, list_directory, model_hash
from hypertrain.miner.best import download_best
from hypertrain.miner.errors import MinerError
from hypertrain.protocol.cliargs import add_relay_url, add_service_url
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.keyargs import add_wallet_flags, key_from_args
from hypertrain.relay.client import RelayClient

EXPIRY_MARGIN_ROUNDS = 50


def register(sub: Any) -> None:
    parser = sub.add_parser("compete", help="competition mode: commit, upload, status, best")
    cmds = parser.add_subparsers(dest="compete_command", metavar="COMMAND", required=True)
    for name, text, func in (
        ("commit", "commit H(model hash, hotkey) for a model directory", _commit),
        ("upload", "upload a committed model to the relay and reveal it", _upload),
        ("status", "this hotkey's submissions on the leaderboard", _status),
    ):
        cmd = cmds.add_parser(name, help=text)
        add_service_url(cmd, required=True)
        cmd.add_argument("--competition", required=True, help="competition id")
        add_wallet_flags(cmd)
        if name != "status":
            cmd.add_argument("--model-dir", type=Path, required=True, help="model directory")
        if name == "upload":
            add_relay_url(cmd, required=True)
        cmd.set_defaults(func=func)
    best = cmds.add_parser(
        "best", help="download and verify the current best model into a loadable directory"
    )
    add_service_url(best, required=True)
    best.add_argument("--competition", required=True, help="competition id")
    best.add_argument(
        "--out", type=Path, required=True, help="directory to write (absent or empty)"
    )
    best.set_defaults(func=_best)


def _key(args: argparse.Namespace) -> Hotkey:
    return key_from_args(args)


def _print(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")


def checked_model(model_dir: Path, spec: CompetitionSpec) -> str:
    """The model hash of a directory that passes the competition's checks."""
    files = list_directory(model_dir)
    check_directory(model_dir, spec.architecture, spec.data.seq_len)
    return model_hash(files)


def commit_model(
    client: CompetitionClient, key: Hotkey, cid: str, model_dir: Path
) -> tuple[str, CommitAccepted]:
    """Commit to the model in ``model_dir``; returns its model hash and the answer."""
    spec = client.competition(cid)
    sha = checked_model(model_dir, spec)
    body = CompeteCommit(commitment=commitment(sha, key.ss58_address))
    env = seal(
        key, domain=COMMIT_DOMAIN, run_id=cid, body=body.model_dump(),
        expiry_round=client.beacon_round() + EXPIRY_MARGIN_ROUNDS,
    )  # fmt: skip
    return sha, client.compete_commit(env)


def upload_model(
    client: CompetitionClient, relay_url: str, key: Hotkey, cid: str, model_dir: Path
) -> RevealAccepted:
    spec = client.competition(cid)
    sha = checked_model(model_dir, spec)
    files = list_directory(model_dir)
    now = client.beacon_round()
    with RelayClient(relay_url, key, cid) as relay:
        for f in files:
            relay.put(model_dir / f.name, kind="model", round=now,
                      expiry_round=now + EXPIRY_MARGIN_ROUNDS)  # fmt: skip
        base_url = relay.base_url
    now = _past_commit_round(client, cid, commitment(sha, key.ss58_address))
    body = CompeteReveal(model_sha256=sha, files=files, base_url=base_url)
    env = seal(
        key, domain=REVEAL_DOMAIN, run_id=cid, body=body.model_dump(),
        expiry_round=now + EXPIRY_MARGIN_ROUNDS,
    )  # fmt: skip
    return client.compete_reveal(env)


def _past_commit_round(
    client: CompetitionClient, cid: str, mine: str, timeout_s: float = 300.0
) -> int:
    """Wait until the beacon is past this commitment's round (a reveal in the commit's
    own round is refused, so no copy can tie with the original); returns that round."""
    board = client.leaderboard(cid)
    rounds = [c.commit_beacon_round for c in board.competitors if c.commitment == mine]
    if not rounds:
        raise MinerError(f"the service holds no commitment {mine[:16]}…: commit first")
    deadline = time.monotonic() + timeout_s
    while (now := client.beacon_round()) <= rounds[0]:
        if time.monotonic() > deadline:
            raise MinerError(f"the beacon did not pass round {rounds[0]} in {timeout_s:.0f} s")
        time.sleep(0.5)
    return now


def _commit(args: argparse.Namespace) -> int:
    with CompetitionClient(args.service_url) as client:
        sha, answer = commit_model(client, _key(args), args.competition, args.model_dir)
        _print({**answer.model_dump(), "model_sha256": sha})
    return 0


def _upload(args: argparse.Namespace) -> int:
    with CompetitionClient(args.service_url) as client:
        _print(
            upload_model(
                client, args.relay_url, _key(args), args.competition, args.model_dir
            ).model_dump()
        )
    return 0


def _best(args: argparse.Namespace) -> int:
    with CompetitionClient(args.service_url) as client:
        got = download_best(client, args.competition, args.out)
    _print({"competition": args.competition, "cycle": got.cycle, "hotkey": got.hotkey,
            "model_sha256": got.model_sha256, "commitment": got.commitment,
            "out": str(got.out)})  # fmt: skip
    return 0


def _status(args: argparse.Namespace) -> int:
    hotkey = _key(args).ss58_address
    with CompetitionClient(args.service_url) as client:
        board = client.leaderboard(args.competition)
    mine = [c.model_dump() for c in board.competitors if c.hotkey == hotkey]
    _print({"competition": args.competition, "hotkey": hotkey, "submissions": mine})
    return 0
