"""The byte layout of one operation's input tensors, and their digests, without torch.

The referee needs the tensors the contested operation read; either party uploads them
and the service checks each tensor's digest against the input hashes both parties
signed, so the uploader need not be trusted. Layout (all integers little-endian)::

    b"HTOPIN1\\n"                      magic, 8 bytes
    u32 count                          number of tensors
    count times:
        u16 n, n bytes                 dtype name, e.g. "torch.float32"
        u8 ndim, ndim x u64            shape
        u64 nbytes, nbytes bytes       raw row-major element bytes

A tensor's digest is ``SHA-256(f"{dtype}:{shape}:" || raw)`` with ``shape`` written as
a Python tuple (``(4, 8)``, ``(3,)``, ``()``): the digest the step tracer records.
"""

from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass
from typing import Final

from hypertrain.dispute.errors import InputMismatchError

MAGIC: Final = b"HTOPIN1\n"
MAX_TENSORS: Final = 64
ITEM_SIZE: Final[dict[str, int]] = {
    "torch.float32": 4,
    "torch.float64": 8,
    "torch.float16": 2,
    "torch.bfloat16": 2,
    "torch.int64": 8,
    "torch.int32": 4,
    "torch.int16": 2,
    "torch.int8": 1,
    "torch.uint8": 1,
    "torch.bool": 1,
}


@dataclass(frozen=True, slots=True)
class RawTensor:
    dtype: str
    shape: tuple[int, ...]
    data: bytes

    def digest(self) -> str:
        return tensor_digest(self.dtype, self.shape, self.data)


def tensor_digest(dtype: str, shape: tuple[int, ...], data: bytes) -> str:
    h = hashlib.sha256(f"{dtype}:{tuple(shape)}:".encode())
    h.update(data)
    return h.hexdigest()


def encode(tensors: list[RawTensor]) -> bytes:
    parts = [MAGIC, struct.pack("<I", len(tensors))]
    for t in tensors:
        name = t.dtype.encode()
        parts += [struct.pack("<H", len(name)), name, struct.pack("<B", len(t.shape))]
        parts += [struct.pack("<Q", d) for d in t.shape]
        parts += [struct.pack("<Q", len(t.data)), t.data]
    return b"".join(parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise InputMismatchError("operation inputs are truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack(fmt, self.take(struct.calcsize(fmt)))
        return int(value)


def decode(data: bytes) -> list[RawTensor]:
    """Parse the layout above; any malformation is an :class:`InputMismatchError`."""
    r = _Reader(data)
    if r.take(len(MAGIC)) != MAGIC:
        raise InputMismatchError("operation inputs do not start with the HTOPIN1 magic")
    count = r.unpack("<I")
    if count > MAX_TENSORS:
        raise InputMismatchError(f"{count} input tensors exceed the limit of {MAX_TENSORS}")
    out = []
    for _ in range(count):
        dtype = r.take(r.unpack("<H")).decode("utf-8", "replace")
        if dtype not in ITEM_SIZE:
            raise InputMismatchError(f"unsupported dtype {dtype!r}")
        shape = tuple(r.unpack("<Q") for _ in range(r.unpack("<B")))
        nbytes = r.unpack("<Q")
        if nbytes != math.prod(shape) * ITEM_SIZE[dtype]:
            raise InputMismatchError(f"{nbytes} bytes do not fit a {dtype} tensor of {shape}")
        out.append(RawTensor(dtype, shape, r.take(nbytes)))
    if r.pos != len(data):
        raise InputMismatchError("trailing bytes after the operation inputs")
    return out


def check_inputs(data: bytes, expected: list[str]) -> list[RawTensor]:
    """Decode ``data`` and require its tensors to hash, in order, to ``expected``."""
    tensors = decode(data)
    if len(tensors) != len(expected):
        raise InputMismatchError(
            f"{len(tensors)} tensors given, the operation reads {len(expected)}"
        )
    for i, (t, want) in enumerate(zip(tensors, expected, strict=True)):
        if t.digest() != want:
            raise InputMismatchError(f"input {i} does not hash to the agreed {want[:16]}…")
    return tensors
