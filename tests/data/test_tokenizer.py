"""Tokenizer training is byte-deterministic; loading is pinned by SHA-256."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from hypertrain.data import EOD_TOKEN, load_tokenizer, train_tokenizer
from hypertrain.data.errors import TokenizerError, TokenizerMismatchError

_TRAIN_IN_SUBPROCESS = """
import hashlib, sys
from pathlib import Path
from hypertrain.data import train_tokenizer
data = train_tokenizer([Path(p) for p in sys.argv[1:]], 600)
sys.stdout.write(hashlib.sha256(data).hexdigest())
"""


def test_training_is_deterministic_across_processes(
    tokenizer_bytes: bytes, corpus_files: list[Path]
) -> None:
    assert train_tokenizer(corpus_files, 600) == tokenizer_bytes
    out = subprocess.run(
        [sys.executable, "-c", _TRAIN_IN_SUBPROCESS, *map(str, corpus_files)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == hashlib.sha256(tokenizer_bytes).hexdigest()


def test_trained_tokenizer_has_eod_and_round_trips(tokenizer_file: Path) -> None:
    digest = hashlib.sha256(tokenizer_file.read_bytes()).hexdigest()
    tok = load_tokenizer(tokenizer_file, digest)
    assert tok.vocab_size == 600
    assert tok.tokenizer.token_to_id(EOD_TOKEN) == tok.eod_id
    text = "ROMEO: But soft, what light through yonder window breaks?"
    ids = tok.encode_batch([text])[0]
    assert tok.tokenizer.decode(ids) == text


def test_pinned_hash_mismatch_is_refused(tokenizer_file: Path) -> None:
    with pytest.raises(TokenizerMismatchError, match="pins"):
        load_tokenizer(tokenizer_file, "0" * 64)


def test_malformed_tokenizer_file_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_bytes(b'{"not": "a tokenizer"}')
    with pytest.raises(TokenizerError, match="not a valid"):
        load_tokenizer(bad)
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(TokenizerError):
        load_tokenizer(bad)
    with pytest.raises(TokenizerError, match="cannot read"):
        load_tokenizer(tmp_path / "missing.json")


def test_tokenizer_without_eod_is_refused(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models

    path = tmp_path / "tokenizer.json"
    path.write_text(Tokenizer(models.BPE()).to_str())
    with pytest.raises(TokenizerError, match="end-of-document"):
        load_tokenizer(path)


def test_bad_training_settings_are_refused(corpus_files: list[Path], tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="vocab_size"):
        train_tokenizer(corpus_files, 100)
    with pytest.raises(TokenizerError, match="min_frequency"):
        train_tokenizer(corpus_files, 600, min_frequency=0)
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"text": ""}\n')
    with pytest.raises(TokenizerError, match="no non-empty"):
        train_tokenizer([empty], 600)
