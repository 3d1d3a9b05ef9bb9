"""``hypertrain-miner``'s command line: --version, one spelling per URL flag, and a usage
error shown with the usage of the subcommand it was made in."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from hypertrain.miner.cli import build_parser, main


def _exit(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int | str | None, str]:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    return done.value.code, capsys.readouterr().err


def test_version_comes_from_the_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"hypertrain-miner {version('hypertrain')}\n"


@pytest.mark.parametrize(
    ("argv", "usage", "error"),
    [
        (["selfcheck", "--device", "cuda"], "selfcheck", "unrecognized arguments: --device cuda"),
        (["run", "--follow", "--bogus"], "run", "unrecognized arguments: --bogus"),
        (["compete", "status", "--competition", "c", "--service-url", "u", "--bogus"],
         "compete status", "unrecognized arguments: --bogus"),
        (["compete", "commit", "--service-url", "u"], "compete commit", "required"),
        # a device this machine does not have (no machine has 64 GPUs; CPU builds have none)
        (["status", "--device", "cuda:64"], "status", "--device cuda:64: "),
    ],
)  # fmt: skip
def test_a_usage_error_shows_the_subcommands_usage(
    argv: list[str], usage: str, error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _exit(capsys, *argv)
    assert code == 2 and err.startswith(f"usage: hypertrain-miner {usage} "), err
    assert f"hypertrain-miner {usage}: error: " in err and error in err, err


def test_old_spellings_of_the_urls_work_and_warn(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    args = parser.parse_args(
        ["compete", "upload", "--service", "s", "--relay", "r", "--competition", "c",
         "--model-dir", "m"]
    )  # fmt: skip
    assert (args.service_url, args.relay_url) == ("s", "r")
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "warning: --service is deprecated and goes in the next release: use --service-url",
        "warning: --relay is deprecated and goes in the next release: use --relay-url",
    ]
    args = parser.parse_args(["join", "--service-url", "s", "--relay-url", "r"])
    assert (args.service_url, args.relay_url) == ("s", "r") and capsys.readouterr().err == ""
