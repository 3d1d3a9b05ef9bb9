"""Checkpoint bytes: the canonical state stream followed by its 32-byte state hash.

Decoding validates everything before a single tensor is built, and raises
:class:`CheckpointError` for: truncation or trailing bytes, a bad magic or version,
a config digest of another model/optimizer, tensor names, dtypes or shapes that
differ from the expected layout, a trailer that is not the hash of the stream, a
hash other than the one the caller expects (e.g. a committed Merkle leaf), and
NaN/Inf values. Nothing is unpickled: the format is plain bytes.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import torch

from hypertrain.protocol import domains
from hypertrain.trainer.errors import CheckpointError
from hypertrain.trainer.state import (
    CODE_DTYPES,
    HEADER,
    MAGIC,
    VERSION,
    StateConfig,
    TensorSpec,
    TrainState,
    state_hash,
    stream_chunks,
)

DIGEST_SIZE = 32


def encode_checkpoint(state: TrainState) -> bytes:
    """Canonical stream || state hash."""
    return b"".join(bytes(c) for c in stream_chunks(state)) + state_hash(state)


def checkpoint_size(config: StateConfig) -> int:
    """The exact byte size of every checkpoint of ``config`` (a download limit)."""
    return HEADER.size + tensors_size(config.layout()) + DIGEST_SIZE


def tensors_size(specs: list[TensorSpec]) -> int:
    """Bytes of the per-tensor records of ``specs`` in a state stream (headers and data)."""
    size = 0
    for spec in specs:
        numel = int(np.prod(spec.shape, dtype=np.int64))
        size += 2 + len(spec.name.encode("utf-8")) + 2 + 8 * len(spec.shape)
        size += numel * spec.dtype.itemsize
    return size


def save_checkpoint(state: TrainState, path: Path) -> bytes:
    """Write the checkpoint atomically (temp file + rename); return its state hash."""
    data = encode_checkpoint(state)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return data[-DIGEST_SIZE:]


class Reader:
    """Bounds-checked little-endian reader over a byte buffer, up to ``trailer`` bytes
    before its end (a checkpoint's hash trailer; none for a carried state)."""

    def __init__(self, data: bytes, trailer: int = DIGEST_SIZE, what: str = "checkpoint") -> None:
        self.view = memoryview(data)
        self.pos = 0
        self.end = len(data) - trailer
        self.what = what

    def take(self, n: int, what: str) -> memoryview:
        end = self.pos + n
        if end > self.end:
            raise CheckpointError(f"{self.what} is truncated (while reading {what})")
        out = self.view[self.pos : end]
        self.pos = end
        return out

    def unpack(self, fmt: str, what: str) -> tuple[int, ...]:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))


def read_tensor_header(r: Reader, expected: TensorSpec) -> int:
    """Check one tensor header against the layout; return its data size in bytes."""
    (name_len,) = r.unpack("<H", "tensor name length")
    try:
        name = bytes(r.take(name_len, "tensor name")).decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointError("tensor name is not UTF-8") from None
    if name != expected.name:
        raise CheckpointError(f"expected tensor {expected.name!r}, found {name!r}")
    code, ndim = r.unpack("<BB", f"{name} dtype")
    dtype = CODE_DTYPES.get(code)
    if dtype != expected.dtype:
        raise CheckpointError(f"{name}: dtype code {code}, expected {expected.dtype}")
    shape = r.unpack(f"<{ndim}Q", f"{name} shape")
    if tuple(shape) != expected.shape:
        raise CheckpointError(f"{name}: shape {tuple(shape)}, expected {expected.shape}")
    return int(np.prod(shape, dtype=np.int64)) * dtype.itemsize


def read_header(
    data: bytes, config: StateConfig, tensors: int, *, magic: bytes = MAGIC,
    what: str = "checkpoint", trailer: int = DIGEST_SIZE,
) -> tuple[int, bytes]:  # fmt: skip
    """Check a state stream's header (``magic``, version, ``config``'s digest, ``tensors``
    tensors); returns its step counter and config digest."""
    if len(data) < HEADER.size + trailer:
        raise CheckpointError(f"{what} is truncated ({len(data)} bytes)")
    found, version, digest, step, count = HEADER.unpack_from(data)
    if found != magic or version != VERSION:
        raise CheckpointError(f"not a version-{VERSION} {what} (magic {found!r})")
    if digest != config.digest():
        raise CheckpointError(f"{what} was written for another model or optimizer config")
    if count != tensors:
        raise CheckpointError(f"{what} has {count} tensors, expected {tensors}")
    return step, digest


def decode_checkpoint(
    data: bytes, config: StateConfig, expected_hash: bytes | None = None
) -> TrainState:
    """Parse and fully validate checkpoint bytes for ``config``; see the module docstring."""
    layout = config.layout()
    step, digest = read_header(data, config, len(layout))
    r = Reader(data)
    r.pos = HEADER.size
    spans: list[tuple[TensorSpec, memoryview]] = []
    for spec in layout:
        nbytes = read_tensor_header(r, spec)
        spans.append((spec, r.take(nbytes, f"{spec.name} data")))
    if r.pos + DIGEST_SIZE != len(data):
        raise CheckpointError(f"checkpoint has {len(data) - r.pos - DIGEST_SIZE} trailing bytes")
    hasher = domains.tagged_hasher(domains.STATE)
    hasher.update(r.view[: r.pos])
    actual = hasher.digest()
    if actual != data[-DIGEST_SIZE:]:
        raise CheckpointError("checkpoint hash does not match its contents (corrupt)")
    if expected_hash is not None and actual != expected_hash:
        raise CheckpointError(
            f"checkpoint hash {actual.hex()[:16]}… is not the expected {expected_hash.hex()[:16]}…"
        )
    tensors = {spec.name: to_tensor(spec, buf) for spec, buf in spans}
    return TrainState(step, tensors, digest)


def to_tensor(spec: TensorSpec, buf: memoryview) -> torch.Tensor:
    raw = bytearray(buf)
    if spec.dtype == torch.bfloat16:
        t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16)
    else:
        t = torch.frombuffer(raw, dtype=spec.dtype)
    t = t.reshape(spec.shape)
    if not bool(torch.isfinite(t).all()):
        raise CheckpointError(f"{spec.name} contains NaN or Inf")
    return t


def load_checkpoint(
    path: Path, config: StateConfig, expected_hash: bytes | None = None
) -> TrainState:
    return decode_checkpoint(path.read_bytes(), config, expected_hash)
