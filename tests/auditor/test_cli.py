"""The ``hypertrain auditor`` group: help and argument errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypertrain.cli import main


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["auditor", "run", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--service-url", "--relay-url", "--key-file", "--worker-token-file", "--follow"):
        assert flag in out


def test_round_or_follow_required(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "auditor",
        "run",
        "--service-url",
        "http://127.0.0.1:9",
        "--relay-url",
        "http://127.0.0.1:9",
        "--run-id",
        "r",
        "--key-file",
        str(tmp_path / "k"),
        "--worker-token-file",
        str(tmp_path / "t"),
        "--dataset-dir",
        str(tmp_path),
    ]
    assert main(args) == 1
    assert "exactly one of --round W or --follow" in capsys.readouterr().err
    assert main([*args, "--round", "0"]) == 1
    assert "error:" in capsys.readouterr().err
