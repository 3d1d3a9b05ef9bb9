"""``hypertrain-miner``: selfcheck, join, run, watch, leave, status (argparse, one handler each)."""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from pathlib import Path

from hypertrain.miner import actions, compete, joining
from hypertrain.miner.config import FLAGS
from hypertrain.miner.hooks import HooksFor, honest
from hypertrain.protocol.cliargs import (
    CommandParser,
    add_relay_url,
    add_service_url,
    add_version,
    run_command,
    usage_error,
)
from hypertrain.protocol.keyargs import WALLET_FLAGS, WALLET_HELP
from hypertrain.trainer.device import DeviceError, require_device

# settings whose flag is one of the shared spellings (hypertrain.protocol.cliargs)
_URL_FLAGS = {"service_url": add_service_url, "relay_url": add_relay_url}


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="miner.toml (flags override it)")
    for name, text in FLAGS:
        if name in _URL_FLAGS:
            _URL_FLAGS[name](parser, text)
            continue
        # the wallet settings also take btcli's spelling (--wallet.name, ...): one list
        flags = WALLET_FLAGS.get(name, ("--" + name.replace("_", "-"),))
        parser.add_argument(*flags, dest=name, help=WALLET_HELP.get(name, text))


def build_parser(hooks: HooksFor = honest) -> argparse.ArgumentParser:
    """The miner's parser; ``run`` and ``watch`` compute rounds with ``hooks``."""
    parser = CommandParser(
        prog="hypertrain-miner", description="Run a Hypertrain island: train, commit, serve audits."
    )
    add_version(parser)
    parser.add_argument("--log-level", default="WARNING", help="Python logging level")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    check = sub.add_parser("selfcheck", help="admission workload on every local device (table)")
    check.add_argument("--json", action="store_true", help="print JSON instead of a table")
    check.add_argument(
        "--claim-mib", type=int, default=1, help="memory each device claims in the report"
    )
    check.set_defaults(func=actions.selfcheck_cmd)
    join = sub.add_parser("join", help="send a signed join request with the hardware report")
    _common(join)
    join.add_argument("--endpoint", help="optional public URL of this miner")
    join.add_argument("--region", help="optional: where the island runs (e.g. 'EU West')")
    join.add_argument(
        "--micro-batches",
        type=int,
        help="micro-batches per step per rank (sets the island's token budget; default: the"
        " run's layout)",
    )
    join.add_argument(
        "--join-attempts",
        type=int,
        help="admission challenges to answer at most: after a late answer, join again for a"
        " fresh one (default 3; join_attempts in miner.toml)",
    )
    join.set_defaults(func=joining.join_cmd)
    run = sub.add_parser("run", help="train one round (--round W) or every round (--follow)")
    _common(run)
    run.add_argument("--round", type=int, help="round to train")
    run.add_argument("--follow", action="store_true", help="train every round as it opens")
    run.add_argument("--wait-s", type=float, default=0.0, help="wait this long for --round W")
    run.set_defaults(func=functools.partial(actions.run_cmd, hooks=hooks))
    watch = sub.add_parser("watch", help="serve audits: keep checkpoints available, show verdicts")
    _common(watch)
    watch.add_argument("--follow", action="store_true", help="keep watching (else one pass)")
    watch.add_argument(
        "--dispute",
        action="store_true",
        help="dispute each fault-bearing verdict this island's own check refutes (--follow does)",
    )
    watch.set_defaults(func=functools.partial(actions.watch_cmd, hooks=hooks))
    leave = sub.add_parser(
        "leave", help="send a signed leave: no round opened after it (escrow keeps vesting)"
    )
    _common(leave)
    leave.add_argument("--reason", default="", help="optional reason, shown with the leave")
    leave.set_defaults(func=actions.leave_cmd)
    status = sub.add_parser("status", help="this hotkey's standing in the run")
    _common(status)
    status.set_defaults(func=actions.status_cmd)
    compete.register(sub)
    return parser


def main(argv: list[str] | None = None, hooks: HooksFor = honest) -> int:
    """``hypertrain-miner``; ``hooks`` is for the operator's tooling (default: honest)."""
    args = build_parser(hooks).parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=str(args.log_level).upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    if getattr(args, "device", None):
        try:
            require_device(args.device)
        except DeviceError as exc:  # a flag this machine cannot honour: the command's usage
            usage_error(args, str(exc))
    return run_command(args)


if __name__ == "__main__":
    raise SystemExit(main())
