from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable, Iterator
from importlib.metadata import version

import pytest

from hypertrain.cli import GROUPS, _requested_group, build_parser, main
from hypertrain.miner.cli import build_parser as build_miner_parser


def test_group_found_after_global_options() -> None:
    assert _requested_group(["--log-level", "WARNING", "relay", "serve"]) == "relay"
    assert _requested_group(["protocol", "canon", "x"]) == "protocol"
    assert _requested_group(["--help"]) is None


def test_protocol_group_does_not_import_torch() -> None:
    code = (
        "import sys; from hypertrain.cli import build_parser; build_parser('protocol'); "
        "sys.exit(1 if 'torch' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_every_group_registers() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hypertrain.cli", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0
    for group in GROUPS:
        assert group in out.stdout


def _commands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every subcommand parser under it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _commands(sub)


CANONICAL = {"service_url": "--service-url", "relay_url": "--relay-url", "data_url": "--data-url"}


@pytest.mark.parametrize("build", [build_parser, build_miner_parser])
def test_one_spelling_per_url_flag(build: Callable[[], argparse.ArgumentParser]) -> None:
    """The service's URL is --service-url and the relay's --relay-url wherever they are
    taken; an old spelling is only an alias of those."""
    seen = set()
    for command in _commands(build()):
        for action in command._actions:
            old = set(action.option_strings) & {"--service", "--url", "--relay"}
            if action.dest in CANONICAL or old:
                assert action.option_strings[0] == CANONICAL.get(action.dest), (
                    command.prog,
                    action.option_strings,
                )
                seen.add(action.dest)
    assert seen <= set(CANONICAL) and {"service_url", "relay_url"} <= seen


def test_an_old_spelling_works_and_warns_once(capsys: pytest.CaptureFixture[str]) -> None:
    url = "http://127.0.0.1:9"
    for flag in ("--url", "--service", "--service-url"):
        args = build_parser("challenge").parse_args(["challenge", "status", flag, url])
        assert args.service_url == url
        err = capsys.readouterr().err
        if flag == "--service-url":
            assert err == ""
        else:
            assert (
                err == f"warning: {flag} is deprecated and goes in the next release:"
                " use --service-url\n"
            )
    args = build_parser("relay").parse_args(["relay", "get", "ab", "--relay=" + url, "--out", "f"])
    assert args.relay_url == url and capsys.readouterr().err.count("\n") == 1
    witness = ["aggregator", "witness", "--run-id", "r", "--service", url, "--relay", url]
    args = build_parser("aggregator").parse_args(witness)
    assert args.service_url == url and args.relay_url == url
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {old} is deprecated and goes in the next release: use {old}-url"
        for old in ("--service", "--relay")
    ]


def test_version_comes_from_the_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"hypertrain {version('hypertrain')}\n"


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (
            ["relay", "get", "ab", "--out", "f", "--relay-url", "u", "--bogus"],
            "hypertrain relay get",
        ),
        (["challenge", "status", "--wait", "x"], "hypertrain challenge status"),
        (["protocol", "--bogus", "canon"], "hypertrain protocol"),
        (["--bogus", "protocol", "canon", "f"], "hypertrain [-h]"),
    ],
)
def test_a_usage_error_shows_the_usage_of_the_command_it_was_made_in(
    argv: list[str], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.startswith(f"usage: {usage}"), err
