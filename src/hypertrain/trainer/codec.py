"""int8 blockwise absmax codec for pseudo-gradients, with a canonical byte encoding.

Each tensor is flattened (C order) and cut into blocks of ``block_size`` elements
(the last block may be short). Per block, ``scale = absmax / 127`` (float32) and
``q = clamp(round_half_even(x / scale), -127, 127)`` as int8 (q = 0 where scale = 0).
Decoding is ``q * scale``. Every operation is elementwise or an exact max, so the
bytes do not depend on thread count. Layout (all integers little-endian):

    header:  magic "HTQ8" | u16 version | u32 block_size | u32 tensor count
             per tensor: u16 name length | name | u8 dtype code | u8 ndim | u64 dims...
    bodies:  per tensor, in header order: f32 scales[ceil(n / block_size)] | i8 q[n]

The whole header comes first (its tensor table, shared with the sparse codec, is
update_header.py's), so the exact total length is known before any body is read: a
decoder refuses a wrong length, a bad header, a non-finite or negative scale, or the
unused code -128 with :class:`CodecError`, and :func:`iter_decode` yields one tensor at
a time for aggregators that stream many updates.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from hypertrain.protocol import domains
from hypertrain.trainer.errors import CodecError
from hypertrain.trainer.update_header import check_tensors, entry_bytes, read_fixed, read_tensors

MAGIC = b"HTQ8"
VERSION = 1
HEADER = struct.Struct("<4sHII")


@dataclass(frozen=True, slots=True)
class TensorMeta:
    name: str
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def body_size(self, block_size: int) -> int:
        return 4 * -(-self.numel // block_size) + self.numel


def update_hash(data: bytes) -> bytes:
    """``tagged_hash(UPDATE, encoded update)``."""
    return domains.tagged_hash(domains.UPDATE, data)


def quantize(x: Tensor, block_size: int) -> tuple[Tensor, Tensor]:
    """(float32 scales, int8 codes) of a tensor; refuses non-finite input."""
    flat = x.detach().to(torch.float32).reshape(-1).cpu()
    if not bool(torch.isfinite(flat).all()):
        raise CodecError("cannot encode a tensor with NaN or Inf")
    n = flat.numel()
    pad = -n % block_size
    blocks = torch.nn.functional.pad(flat, (0, pad)).view(-1, block_size)
    scales = blocks.abs().amax(dim=1) / 127.0  # (num_blocks,)
    safe = torch.where(scales > 0, scales, torch.ones_like(scales))
    q = torch.round(blocks / safe[:, None]).clamp_(-127, 127)
    q = torch.where(scales[:, None] > 0, q, torch.zeros_like(q))
    return scales, q.to(torch.int8).reshape(-1)[:n]


def dequantize(scales: Tensor, q: Tensor, block_size: int, shape: tuple[int, ...]) -> Tensor:
    per_elem = scales.repeat_interleave(block_size)[: q.numel()]
    return (q.to(torch.float32) * per_elem).reshape(shape)


def encode_int8(tensors: Mapping[str, Tensor], block_size: int) -> bytes:
    """Canonical int8 encoding of named tensors (order = mapping order)."""
    if block_size < 1:
        raise CodecError(f"block size must be positive, got {block_size}")
    header = [HEADER.pack(MAGIC, VERSION, block_size, len(tensors))]
    bodies: list[bytes] = []
    for name, t in tensors.items():
        header.append(entry_bytes(name, tuple(t.shape)))
        scales, q = quantize(t, block_size)
        bodies += [scales.numpy().tobytes(), q.numpy().tobytes()]
    return b"".join(header + bodies)


def parse_header(data: bytes) -> tuple[int, list[TensorMeta], int]:
    """(block size, tensor metas, offset of the first body); checks the exact total length."""
    block_size, count = read_fixed(data, HEADER, MAGIC, VERSION, "int8", CodecError)
    if block_size < 1:
        raise CodecError(f"bad header: block size {block_size}")
    metas, pos = read_tensors(
        data, HEADER.size, count, TensorMeta, lambda m: m.body_size(block_size), CodecError
    )
    return block_size, metas, pos


def iter_decode(
    data: bytes, expected: Sequence[tuple[str, tuple[int, ...]]] | None = None
) -> Iterator[tuple[str, Tensor]]:
    """Validate the header (and names/shapes if ``expected``), then yield tensors one by one."""
    block_size, metas, pos = parse_header(data)
    check_tensors(metas, expected, CodecError)
    view = memoryview(data)
    for meta in metas:
        nb = -(-meta.numel // block_size)
        scales = np.frombuffer(view[pos : pos + 4 * nb], dtype="<f4")
        codes = np.frombuffer(view[pos + 4 * nb : pos + 4 * nb + meta.numel], dtype=np.int8)
        pos += meta.body_size(block_size)
        if not np.isfinite(scales).all() or (scales < 0).any():
            raise CodecError(f"{meta.name}: scale is NaN, Inf or negative")
        if (codes == -128).any():
            raise CodecError(f"{meta.name}: code -128 never occurs in a canonical update")
        s, q = torch.from_numpy(scales.copy()), torch.from_numpy(codes.copy())
        yield meta.name, dequantize(s, q, block_size, meta.shape)


def decode_int8(
    data: bytes, expected: Sequence[tuple[str, tuple[int, ...]]] | None = None
) -> dict[str, Tensor]:
    """Decode a whole update (see :func:`iter_decode`)."""
    return dict(iter_decode(data, expected))


def relative_l2(original: Mapping[str, Tensor], decoded: Mapping[str, Tensor]) -> float:
    """``||x - x_hat|| / ||x||`` over all tensors together (float64 accumulation)."""
    err = sum(float((original[k].double() - decoded[k].double()).pow(2).sum()) for k in original)
    ref = sum(float(original[k].double().pow(2).sum()) for k in original)
    return math.sqrt(err / ref) if ref > 0 else math.sqrt(err)
