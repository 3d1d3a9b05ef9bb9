"""The ``hypertrain`` command line: one subcommand group per package.

Each group lives in its package's ``cli`` module, which exposes
``register(subparsers)``; only the group being run is imported, so
``hypertrain protocol ...`` never loads torch. Logging is configured here, once.
Every level's parser is a :class:`~hypertrain.protocol.cliargs.CommandParser`, so a
usage error shows the usage of the subcommand it was made in.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Final

from hypertrain.protocol.cliargs import CommandParser, add_version, run_command

GROUPS: Final[dict[str, str]] = {
    "protocol": "hypertrain.protocol.cli",
    "ledger": "hypertrain.ledger.cli",
    "trainer": "hypertrain.trainer.cli",
    "data": "hypertrain.data.cli",
    "beacon": "hypertrain.beacon.cli",
    "relay": "hypertrain.relay.cli",
    "aggregator": "hypertrain.aggregator.cli",
    "challenge": "hypertrain.challenge.cli",
    "devnet": "hypertrain.devnet.cli",
    "auditor": "hypertrain.auditor.cli",
    "run": "hypertrain.ops.run_cli",
    "keys": "hypertrain.ops.keys_cli",
    "referee": "hypertrain.referee.cli",
    "competition": "hypertrain.evaluator.cli",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = CommandParser(prog="hypertrain", description="Verifiable, permissionless pretraining.")
    add_version(parser)
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    subparsers = parser.add_subparsers(dest="group", metavar="GROUP", required=True)
    for name, module_name in GROUPS.items():
        if only is None or name == only:
            importlib.import_module(module_name).register(subparsers)
    return parser


def _requested_group(args: list[str]) -> str | None:
    """The group named on the command line, skipping global options and their values."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--log-level")
    _, rest = pre.parse_known_args(args)
    return rest[0] if rest and not rest[0].startswith("-") else None


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    group = _requested_group(args_in)
    parser = build_parser(group if group in GROUPS else None)
    args = parser.parse_args(args_in)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.log_level != "DEBUG":  # one line per HTTP request (polling) only at DEBUG
        for name in ("httpx", "httpcore"):
            logging.getLogger(name).setLevel(logging.WARNING)
    return run_command(args)


if __name__ == "__main__":
    raise SystemExit(main())
