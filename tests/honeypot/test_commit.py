"""python -m hypertrain.honeypot.commit on input an operator gets wrong: one error line."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypertrain.honeypot.commit import main as commit_tool


def test_a_malformed_list_is_one_error_line_naming_each_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "honeypots.json"
    path.write_text('{"salt": "ab", "entries": [{"hotkey": "x", "role": "island"}]}')
    assert commit_tool([str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1
    for field in ("salt", "entries.0.hotkey", "entries.0.strategy"):
        assert field in captured.err


def test_a_missing_or_non_json_file_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert commit_tool([str(tmp_path / "absent.json")]) == 1
    assert capsys.readouterr().err.startswith(f"error: cannot read {tmp_path / 'absent.json'}")
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert commit_tool([str(broken)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not a honeypot list" in err
