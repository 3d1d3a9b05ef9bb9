"""The dataset descriptor: the file a run manifest pins (by SHA-256) to name its data.

It records the dataset root, sample count, sequence length, token storage width, the
tokenizer's hash and end-of-document id, every shard with its hash, the sample-hash
file, the held-out split and what reading the corpus saw (document counts, dropped
documents and tokens). It is written as canonical JSON (RFC 8785), so its SHA-256 is a
function of its content alone; file names inside it are relative to its directory.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hypertrain.data.errors import DescriptorError
from hypertrain.protocol.canonical import canonical_bytes, parse_json
from hypertrain.protocol.errors import CanonicalJSONError
from hypertrain.protocol.manifest import DataSpec

FORMAT: Final = "hypertrain-dataset/1"
DESCRIPTOR_NAME: Final = "dataset.json"
MAX_DESCRIPTOR_BYTES: Final = 64 << 20
_HEX64 = r"^[0-9a-f]{64}$"
TokenDtype = Literal["uint16", "uint32"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ShardInfo(_Model):
    """One shard: ``sample_count`` rows of ``seq_len`` ids, C order, little-endian."""

    file: str = Field(pattern=r"^shard-[0-9]{5,}\.bin$")
    sample_count: int = Field(ge=1)
    sha256: str = Field(pattern=_HEX64)


class HashFileInfo(_Model):
    """The file of 32-byte sample hashes in sample-id order (the Merkle leaves' data)."""

    file: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    sha256: str = Field(pattern=_HEX64)


class SplitInfo(_Model):
    """Held-out split by sample-hash prefix (see :mod:`hypertrain.data.split`)."""

    rule: Literal["sample-hash-prefix-u64"] = "sample-hash-prefix-u64"
    heldout_ppm: int = Field(ge=0, lt=1_000_000)
    heldout_count: int = Field(ge=0)
    train_count: int = Field(ge=0)


class SourceInfo(_Model):
    name: str = Field(min_length=1, max_length=255)
    size_bytes: int = Field(ge=0)
    sha256: str = Field(pattern=_HEX64)


class CorpusInfo(_Model):
    """What reading the corpus saw; every dropped document or token is counted here."""

    sources: list[SourceInfo]
    documents: int = Field(ge=0)
    empty_documents: int = Field(ge=0)
    # rows a score filter dropped, and the filter (omitted without one: older bytes stay)
    filtered_documents: int = Field(default=0, ge=0, exclude_if=lambda v: v == 0)
    score_filter: str | None = Field(default=None, max_length=64, exclude_if=lambda v: v is None)
    tokens: int = Field(ge=0)
    tail_tokens_dropped: int = Field(ge=0)


class DatasetDescriptor(_Model):
    format: Literal["hypertrain-dataset/1"] = FORMAT
    dataset_root: str = Field(pattern=_HEX64)
    sample_count: int = Field(ge=1)
    seq_len: int = Field(ge=2)
    token_dtype: TokenDtype
    vocab_size: int = Field(ge=2)
    eod_id: int = Field(ge=0)
    tokenizer_sha256: str = Field(pattern=_HEX64)
    samples_per_shard: int = Field(ge=1)
    shards: list[ShardInfo] = Field(min_length=1)
    sample_hashes: HashFileInfo
    split: SplitInfo
    corpus: CorpusInfo

    @model_validator(mode="after")
    def _consistent(self) -> DatasetDescriptor:
        if sum(s.sample_count for s in self.shards) != self.sample_count:
            raise ValueError("shard sample counts do not add up to sample_count")
        if any(s.sample_count != self.samples_per_shard for s in self.shards[:-1]):
            raise ValueError("every shard but the last must hold samples_per_shard samples")
        if self.shards[-1].sample_count > self.samples_per_shard:
            raise ValueError("the last shard holds more than samples_per_shard samples")
        if self.split.heldout_count + self.split.train_count != self.sample_count:
            raise ValueError("split counts do not add up to sample_count")
        if self.token_dtype != dtype_for_vocab(self.vocab_size):
            raise ValueError(f"token_dtype {self.token_dtype} does not fit vocab_size")
        if self.eod_id >= self.vocab_size:
            raise ValueError("eod_id is outside the vocabulary")
        return self

    def canonical(self) -> bytes:
        return canonical_bytes(self.model_dump(mode="json"))

    def sha256(self) -> str:
        return hashlib.sha256(self.canonical()).hexdigest()

    def data_spec(self) -> DataSpec:
        """The run manifest's ``data`` section that pins this dataset."""
        return DataSpec(
            dataset_root=self.dataset_root,
            descriptor_sha256=self.sha256(),
            tokenizer_sha256=self.tokenizer_sha256,
            sample_count=self.sample_count,
            seq_len=self.seq_len,
        )


def dtype_for_vocab(vocab_size: int) -> TokenDtype:
    """uint16 when every id fits in 16 bits, else uint32."""
    return "uint16" if vocab_size <= 1 << 16 else "uint32"


def write_descriptor(descriptor: DatasetDescriptor, path: Path) -> str:
    """Write the canonical bytes; returns their SHA-256 hex."""
    data = descriptor.canonical()
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def read_descriptor(path: Path, expected_sha256: str | None = None) -> DatasetDescriptor:
    """Parse and validate a descriptor file, optionally against a pinned hash."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DescriptorError(f"cannot read descriptor {path.name}: {exc.strerror}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if expected_sha256 is not None and digest != expected_sha256.lower():
        raise DescriptorError(f"descriptor has SHA-256 {digest}, expected {expected_sha256}")
    try:
        return DatasetDescriptor.model_validate(parse_json(data, max_bytes=MAX_DESCRIPTOR_BYTES))
    except (CanonicalJSONError, ValidationError) as exc:
        raise DescriptorError(f"invalid dataset descriptor {path.name}: {exc}") from exc
