"""``hypertrain data``: train a tokenizer, prepare, verify, inspect, assign."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from hypertrain.cli import main


def test_cli_end_to_end(
    corpus_files: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tok = tmp_path / "tok.json"
    assert main(["data", "train-tokenizer", *map(str, corpus_files), "--vocab-size", "300",
                 "--out", str(tok)]) == 0  # fmt: skip
    digest = hashlib.sha256(tok.read_bytes()).hexdigest()
    assert digest in capsys.readouterr().out
    out = tmp_path / "ds"
    args = ["data", "prepare", *map(str, corpus_files), "--tokenizer", str(tok),
            "--tokenizer-sha256", digest, "--seq-len", "32", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    assert "dataset_root" in capsys.readouterr().out
    desc = out / "dataset.json"
    assert main(["data", "verify", str(desc)]) == 0
    assert capsys.readouterr().out.startswith("OK:")
    assert main(["data", "info", str(desc)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["data_spec"]["seq_len"] == 32
    roster = tmp_path / "roster.json"
    roster.write_text('[["a", 3], ["b", 2]]')
    assign = ["data", "assign", str(desc), "--run-id", "r", "--round", "0",
              "--randomness", "ab" * 32, "--roster", str(roster)]  # fmt: skip
    assert main(assign) == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result["islands"]["a"]) == 3 and result["state"]["cursor"] == 5
    state = tmp_path / "state.json"
    state.write_text(json.dumps(result["state"]))
    assert main([*assign[:6], "1", *assign[7:], "--state", str(state)]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["state"]["cursor"] == 10
    assert not set(again["islands"]["a"]) & set(result["islands"]["a"])


def test_cli_refuses_a_mismatched_tokenizer(
    tokenizer_file: Path,
    corpus_files: list[Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = str(tmp_path / "o")
    args = ["data", "prepare", str(corpus_files[1]), "--tokenizer", str(tokenizer_file),
            "--tokenizer-sha256", "0" * 64, "--seq-len", "32", "--out", out]  # fmt: skip
    assert main(args) == 1
    assert "error: tokenizer" in capsys.readouterr().err
