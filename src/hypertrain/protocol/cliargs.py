"""Command-line conventions both CLIs share: one spelling per flag, ``--version``, a
subcommand's own usage on its usage errors, and one exit-status rule.

The challenge service's URL is ``--service-url``, the relay's ``--relay-url`` and a
published dataset's ``--data-url`` on every command of ``hypertrain`` and
``hypertrain-miner``. The spellings used before (``--service``, ``--url``, ``--relay``)
still work for one release: each use prints one deprecation line to stderr. A parser
of class :class:`CommandParser` (its subcommands inherit the class) answers an unknown
argument with the usage of the subcommand that was given it, not with the top level's.
A command that fails on bad input or a system error prints one ``error:`` line and
exits 1; an interrupted one exits 130 (:func:`run_command`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final, NoReturn, Protocol

SERVICE_URL_FLAGS: Final = ("--service-url", "--service", "--url")
RELAY_URL_FLAGS: Final = ("--relay-url", "--relay")
DATA_URL_FLAGS: Final = ("--data-url", "--url")  # where a dataset is published
_PARSER: Final = "command_parser"  # the namespace attribute naming the innermost parser


class _ArgumentTarget(Protocol):
    """A parser or an argument group: anything arguments are added to."""

    def add_argument(self, *name_or_flags: str, **kwargs: Any) -> argparse.Action: ...


class CommandParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose usage errors name the subcommand given.

    Subparsers are built with their parent's class, so every level is a CommandParser:
    each refuses an argument it does not know with its own usage (the innermost one
    first), and the innermost one reached records itself in the namespace for
    :func:`usage_error`.
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if not hasattr(parsed, _PARSER):  # the innermost parser finishes first
            setattr(parsed, _PARSER, self)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def usage_error(args: argparse.Namespace, message: str) -> NoReturn:
    """End with the usage of the (sub)command ``args`` were parsed by and ``message``
    (exit status 2, as argparse's own usage errors)."""
    parser = getattr(args, _PARSER, None)
    if not isinstance(parser, argparse.ArgumentParser):
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)
    parser.error(message)


class _Spelling(argparse.Action):
    """Store the value; an old spelling of the flag also prints one deprecation line."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        current = self.option_strings[0]
        if option_string is not None and option_string != current:
            sys.stderr.write(
                f"warning: {option_string} is deprecated and goes in the next release:"
                f" use {current}\n"
            )
        setattr(namespace, self.dest, values)


def _add_url(
    target: _ArgumentTarget, flags: tuple[str, ...], dest: str, help_text: str, **kwargs: Any
) -> None:
    default = "; default %(default)s" if kwargs.get("default") is not None else ""
    old = ", ".join(flags[1:])
    target.add_argument(
        *flags, dest=dest, metavar="URL", action=_Spelling,
        help=f"{help_text}{default} ({old}: deprecated spellings)", **kwargs,
    )  # fmt: skip


def add_service_url(
    target: _ArgumentTarget, help_text: str = "challenge service base URL", **kwargs: Any
) -> None:
    """``--service-url`` (into ``args.service_url``); ``--service`` and ``--url`` warn."""
    _add_url(target, SERVICE_URL_FLAGS, "service_url", help_text, **kwargs)


def add_relay_url(
    target: _ArgumentTarget, help_text: str = "relay base URL", **kwargs: Any
) -> None:
    """``--relay-url`` (into ``args.relay_url``); ``--relay`` warns."""
    _add_url(target, RELAY_URL_FLAGS, "relay_url", help_text, **kwargs)


def add_data_url(
    target: _ArgumentTarget, help_text: str = "where the dataset is served", **kwargs: Any
) -> None:
    """``--data-url`` (into ``args.data_url``); ``--url`` warns."""
    _add_url(target, DATA_URL_FLAGS, "data_url", help_text, **kwargs)


def package_version() -> str:
    """The installed distribution's version (its package metadata)."""
    try:
        return version("hypertrain")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def run_command(args: argparse.Namespace) -> int:
    """Run the parsed subcommand (``args.func``) and return the process's exit status."""
    try:
        return int(args.func(args))
    except (ValueError, OSError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130


def add_version(parser: argparse.ArgumentParser) -> None:
    """``--version``: print the program's name and the package's version, then exit 0."""
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {package_version()}",
        help="print the version and exit",
    )  # fmt: skip
