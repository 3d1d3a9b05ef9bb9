"""Byte-level BPE tokenizers: deterministic training and hash-pinned loading.

Training uses Hugging Face ``tokenizers`` (no hand-written BPE) over the same streamed
documents that :mod:`hypertrain.data.corpus` feeds to ``prepare``. The result is
serialised as canonical JSON (RFC 8785), so the same corpus and settings give a
byte-identical ``tokenizer.json`` whatever the key order the library happens to emit.
The run manifest pins a tokenizer by the SHA-256 of that file; :func:`load_tokenizer`
refuses a file whose hash differs.

The end-of-document token :data:`EOD_TOKEN` separates documents when packing samples.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from hypertrain.data.corpus import CorpusStats, EmptyPolicy, read_pieces
from hypertrain.data.errors import TokenizerError, TokenizerMismatchError
from hypertrain.protocol.canonical import canonical_bytes

EOD_TOKEN: Final = "<|endoftext|>"  # noqa: S105 (a vocabulary token, not a secret)
MIN_VOCAB_SIZE: Final = 256 + 1  # every byte plus the end-of-document token
MAX_VOCAB_SIZE: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class LoadedTokenizer:
    """A tokenizer with the facts the data pipeline needs about it."""

    tokenizer: Tokenizer
    sha256: str
    vocab_size: int
    eod_id: int

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, without added special tokens."""
        return [e.ids for e in self.tokenizer.encode_batch_fast(texts, add_special_tokens=False)]


def train_tokenizer(
    inputs: Sequence[Path],
    vocab_size: int,
    *,
    min_frequency: int = 2,
    empty_policy: EmptyPolicy = "count",
) -> bytes:
    """Train a byte-level BPE on ``inputs``; returns the canonical tokenizer.json bytes."""
    if not MIN_VOCAB_SIZE <= vocab_size <= MAX_VOCAB_SIZE:
        raise TokenizerError(
            f"vocab_size must be in [{MIN_VOCAB_SIZE}, {MAX_VOCAB_SIZE}], got {vocab_size}"
        )
    if min_frequency < 1:
        raise TokenizerError(f"min_frequency must be >= 1, got {min_frequency}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[EOD_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    stats = CorpusStats()
    texts = _texts(inputs, stats, empty_policy)
    tok.train_from_iterator(texts, trainer=trainer)
    if stats.documents == 0:
        raise TokenizerError("the training corpus has no non-empty documents")
    return canonical_bytes(json.loads(tok.to_str()))


def _texts(inputs: Sequence[Path], stats: CorpusStats, policy: EmptyPolicy) -> Iterator[str]:
    for piece in read_pieces(inputs, stats, empty_policy=policy):
        yield piece.text


def write_tokenizer(data: bytes, path: Path) -> str:
    """Write tokenizer.json bytes; returns their SHA-256 hex (the manifest pin)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def load_tokenizer(path: Path, expected_sha256: str | None = None) -> LoadedTokenizer:
    """Load a tokenizer.json; with ``expected_sha256``, refuse a file that does not match."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TokenizerError(f"cannot read tokenizer {path.name}: {exc.strerror}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if expected_sha256 is not None and digest != expected_sha256.lower():
        raise TokenizerMismatchError(
            f"tokenizer {path.name} has SHA-256 {digest}, the manifest pins {expected_sha256}"
        )
    return tokenizer_from_bytes(data, digest)


def tokenizer_from_bytes(data: bytes, digest: str | None = None) -> LoadedTokenizer:
    """Parse tokenizer.json bytes and look up the end-of-document token."""
    try:
        tok = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as exc:  # bad UTF-8, or the library's bare Exception on bad JSON
        raise TokenizerError(f"not a valid tokenizer.json: {_first_line(exc)}") from exc
    eod = tok.token_to_id(EOD_TOKEN)
    if eod is None:
        raise TokenizerError(f"tokenizer has no end-of-document token {EOD_TOKEN!r}")
    return LoadedTokenizer(
        tokenizer=tok,
        sha256=digest or hashlib.sha256(data).hexdigest(),
        vocab_size=int(tok.get_vocab_size(with_added_tokens=True)),
        eod_id=int(eod),
    )


def _first_line(exc: Any) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
