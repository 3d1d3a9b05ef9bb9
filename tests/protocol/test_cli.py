from __future__ import annotations

import json
from pathlib import Path

import pytest

from hypertrain.cli import main
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey

KEY = Hotkey.from_seed(b"\x44" * 32)


def test_canon_prints_canonical_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "d.json"
    doc.write_text('{ "b": 1.0, "a": [1, 2] }')
    assert main(["protocol", "canon", str(doc)]) == 0
    assert capsys.readouterr().out == '{"a":[1,2],"b":1}\n'
    assert main(["protocol", "canon", "--hash", str(doc)]) == 0
    assert len(capsys.readouterr().out.strip()) == 64


def test_canon_reports_bad_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "d.json"
    doc.write_text('{"a": 1, "a": 2}')
    assert main(["protocol", "canon", str(doc)]) == 1
    assert "duplicate object key" in capsys.readouterr().err


def test_verify_ok_and_tampered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = {"round": 1, "verdict_id": "v1", "reason": "replay disagrees"}
    env = seal(KEY, domain="dispute", run_id="r1", body=body, expiry_round=5)
    path = tmp_path / "env.json"
    path.write_bytes(env.to_bytes())
    assert main(["protocol", "verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert KEY.ss58_address in out and "dispute" in out
    doc = json.loads(env.to_bytes())
    doc["run_id"] = "r2"
    path.write_text(json.dumps(doc))
    assert main(["protocol", "verify", str(path)]) == 1
    assert "REJECTED (bad_signature)" in capsys.readouterr().out
    assert main(["protocol", "verify", "--current-round", "6", str(tmp_path / "env.json")]) == 1
    assert "REJECTED (expired)" in capsys.readouterr().out


def test_verify_checks_known_body_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = seal(KEY, domain="commit", run_id="r1", body={"round": "x"}, expiry_round=5)
    path = tmp_path / "env.json"
    path.write_bytes(env.to_bytes())
    assert main(["protocol", "verify", str(path)]) == 1
    assert "bad_body" in capsys.readouterr().out


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["protocol", "canon", str(tmp_path / "nope.json")]) == 1
    assert "error:" in capsys.readouterr().err
