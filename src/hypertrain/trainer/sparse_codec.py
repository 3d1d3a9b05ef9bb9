"""Sparse low-bit codec for pseudo-gradients: chunked top-k, 2-4 bit values, packed indices.

Each tensor is flattened (C order) and cut into chunks of ``chunk_size`` elements (the
last chunk may be short). Per chunk of length ``n_c`` the encoder keeps the
``k_c = min(k, n_c)`` entries of largest magnitude, ties broken by the lower index (a
stable sort of ``-|x|``), and stores them in ascending index order. Values are
quantised with a ``bits``-bit uniform mid-rise quantiser over ``[-a, a]`` with ``a``
the chunk's largest kept magnitude: ``L = 2**bits`` levels, ``s = a / (L/2)`` (float32),
``code = clamp(floor(x / s) + L/2, 0, L-1)``, decoded as ``(code - L/2 + 0.5) * s``.
Every step is elementwise, an exact max or an integer sort, so the bytes do not depend
on thread count. Layout (all integers little-endian):

    header:  magic "HTSP" | u16 version | u32 chunk_size | u32 k | u8 bits | u32 tensor count
             per tensor: u16 name length | name | u8 dtype code | u8 ndim | u64 dims...
    bodies:  per tensor, in header order:
             f32 scales[num_chunks] | indices | codes
             indices: every kept entry's offset inside its chunk, ``index_bits =
             max(1, ceil(log2(chunk_size)))`` bits each, LSB-first bit stream padded to a byte;
             codes: ``bits`` bits each, the same way.

The whole header comes first (its tensor table, shared with the int8 codec, is
update_header.py's), so the exact length is known before any body is read. A
decoder refuses a wrong length, a bad header, a non-finite or negative scale, an index
outside its chunk or indices that are not strictly ascending with :class:`SparseCodecError`.
What is not sent stays in the island's error-feedback residual (``trainer.update``).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from hypertrain.trainer.codec import TINY
from hypertrain.trainer.errors import CodecError
from hypertrain.trainer.update_header import check_tensors, entry_bytes, read_fixed, read_tensors

MAGIC = b"HTSP"
VERSION = 1
HEADER = struct.Struct("<4sHIIBI")
MAX_CHUNK = 1 << 20


class SparseCodecError(CodecError):
    """A sparse update is malformed (wrong length, bad header, index out of range, ...)."""


@dataclass(frozen=True, slots=True)
class SparseParams:
    """What fixes a sparse encoding: chunk size, entries kept per chunk, bits per value."""

    chunk_size: int
    k: int
    bits: int

    def __post_init__(self) -> None:
        if not 2 <= self.chunk_size <= MAX_CHUNK or not 1 <= self.k <= self.chunk_size:
            raise SparseCodecError(f"bad sparse parameters: chunk {self.chunk_size}, k {self.k}")
        if not 2 <= self.bits <= 4:
            raise SparseCodecError(f"value bits must be 2, 3 or 4, got {self.bits}")

    @property
    def index_bits(self) -> int:
        return max(1, math.ceil(math.log2(self.chunk_size)))

    @property
    def levels(self) -> int:
        return 1 << self.bits


@dataclass(frozen=True, slots=True)
class SparseMeta:
    name: str
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def num_chunks(self, p: SparseParams) -> int:
        return -(-self.numel // p.chunk_size)

    def num_kept(self, p: SparseParams) -> int:
        """Entries kept in this tensor: ``k`` per full chunk, ``min(k, n_c)`` in the last."""
        full, rest = divmod(self.numel, p.chunk_size)
        return full * p.k + min(p.k, rest)

    def body_size(self, p: SparseParams) -> int:
        kept = self.num_kept(p)
        return 4 * self.num_chunks(p) + _packed_len(kept, p.index_bits) + _packed_len(kept, p.bits)


def _packed_len(count: int, width: int) -> int:
    return -(-count * width // 8)


def pack_bits(values: np.ndarray, width: int) -> bytes:
    """Unsigned ``values`` (each < 2**width) as an LSB-first bit stream padded to a byte."""
    v = values.astype(np.uint32)
    bits = ((v[:, None] >> np.arange(width, dtype=np.uint32)) & 1).astype(np.uint8)
    return np.packbits(bits.reshape(-1), bitorder="little").tobytes()


def unpack_bits(data: memoryview, count: int, width: int) -> np.ndarray:
    """Inverse of :func:`pack_bits`: ``count`` unsigned values of ``width`` bits (int64)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    bits = np.unpackbits(raw, bitorder="little")[: count * width].reshape(count, width)
    weights = np.left_shift(np.int64(1), np.arange(width, dtype=np.int64))
    out: np.ndarray = (bits.astype(np.int64) * weights).sum(axis=1)
    return out


def _chunked(x: Tensor, p: SparseParams) -> tuple[np.ndarray, int]:
    flat = x.detach().to(torch.float32).reshape(-1).cpu().numpy()
    if not np.isfinite(flat).all():
        raise SparseCodecError("cannot encode a tensor with NaN or Inf")
    n = flat.size
    pad = -n % p.chunk_size
    return np.pad(flat, (0, pad)).reshape(-1, p.chunk_size), n  # (num_chunks, chunk)


def select_top_k(chunks: np.ndarray, n: int, p: SparseParams) -> list[np.ndarray]:
    """Per chunk, the kept offsets (ascending): largest ``|x|`` first, ties to the lower index."""
    key = -np.abs(chunks)
    if n % p.chunk_size:
        key[-1, n % p.chunk_size :] = np.inf  # padding is never chosen
    order = np.argsort(key, axis=1, kind="stable")[:, : p.k]  # (num_chunks, k)
    out = [np.sort(row) for row in order[:-1]]
    last_len = n - (chunks.shape[0] - 1) * p.chunk_size
    out.append(np.sort(order[-1, : min(p.k, last_len)]))
    return out


def quantize_values(values: np.ndarray, p: SparseParams) -> tuple[np.float32, np.ndarray]:
    """(float32 scale, codes) of one chunk's kept values; see the module docstring."""
    half = p.levels // 2
    absmax = np.float32(np.abs(values).max()) if values.size else np.float32(0)
    scale = np.float32(absmax / np.float32(half))
    safe = scale if scale > 0 else np.float32(1)
    codes = np.floor(values / safe) + half
    return scale, np.clip(codes, 0, p.levels - 1).astype(np.int64)


def dequantize_values(scale: np.ndarray, codes: np.ndarray, p: SparseParams) -> np.ndarray:
    """``(code - L/2 + 0.5) * scale`` in float32 (one rounding per value)."""
    centred = (codes.astype(np.float32) - np.float32(p.levels // 2 - 0.5)).astype(np.float32)
    out: np.ndarray = (centred * scale.astype(np.float32)).astype(np.float32)
    return out


def _encode_tensor(x: Tensor, p: SparseParams) -> bytes:
    chunks, n = _chunked(x, p)
    # A chunk whose scale would be subnormal is sent as zeros (see check_canonical).
    tiny = np.abs(chunks).max(axis=1) / np.float32(p.levels // 2) < TINY
    chunks[tiny] = 0.0
    picks = select_top_k(chunks, n, p)
    scales, indices, codes = [], [], []
    for row, offsets in zip(chunks, picks, strict=True):
        scale, q = quantize_values(row[offsets], p)
        scales.append(scale)
        indices.append(offsets)
        codes.append(q)
    flat_idx = np.concatenate(indices) if indices else np.zeros(0, np.int64)
    flat_codes = np.concatenate(codes) if codes else np.zeros(0, np.int64)
    return (
        np.asarray(scales, dtype="<f4").tobytes()
        + pack_bits(flat_idx, p.index_bits)
        + pack_bits(flat_codes, p.bits)
    )


def encode_sparse(tensors: Mapping[str, Tensor], p: SparseParams) -> bytes:
    """Canonical sparse encoding of named tensors (order = mapping order)."""
    header = [HEADER.pack(MAGIC, VERSION, p.chunk_size, p.k, p.bits, len(tensors))]
    bodies: list[bytes] = []
    for name, t in tensors.items():
        header.append(entry_bytes(name, tuple(t.shape)))
        bodies.append(_encode_tensor(t, p) if t.numel() else b"")
    return b"".join(header + bodies)


def is_sparse(data: bytes) -> bool:
    return data[:4] == MAGIC


def parse_sparse_header(data: bytes) -> tuple[SparseParams, list[SparseMeta], int]:
    """(parameters, tensor metas, offset of the first body); checks the exact total length."""
    error = SparseCodecError
    chunk, k, bits, count = read_fixed(data, HEADER, MAGIC, VERSION, "sparse", error)
    try:
        params = SparseParams(chunk, k, bits)
    except SparseCodecError as exc:
        raise SparseCodecError(f"bad header: {exc}") from None
    metas, pos = read_tensors(
        data, HEADER.size, count, SparseMeta, lambda m: m.body_size(params), error
    )
    return params, metas, pos


def _checked_header(
    data: bytes,
    expected: Sequence[tuple[str, tuple[int, ...]]] | None,
    params: SparseParams | None,
) -> tuple[SparseParams, list[SparseMeta], int]:
    p, metas, pos = parse_sparse_header(data)
    if params is not None and p != params:
        raise SparseCodecError(f"bad header: update uses {p}, the run demands {params}")
    check_tensors(metas, expected, SparseCodecError)
    return p, metas, pos


@dataclass(frozen=True, slots=True)
class SparseBody:
    """One tensor's decoded body: per-chunk scales and, per kept entry, flat position and code."""

    scales: np.ndarray  # (num_chunks,) float32
    chunk_of: np.ndarray  # (kept,) int64
    positions: np.ndarray  # (kept,) int64, flat index into the tensor
    codes: np.ndarray  # (kept,) int64


def _chunk_ids(meta: SparseMeta, p: SparseParams) -> np.ndarray:
    full, rest = divmod(meta.numel, p.chunk_size)
    ids = np.repeat(np.arange(full, dtype=np.int64), p.k)
    return np.concatenate([ids, np.full(min(p.k, rest), full, dtype=np.int64)])


def read_body(view: memoryview, pos: int, meta: SparseMeta, p: SparseParams) -> SparseBody:
    """Validate and unpack one body starting at ``pos`` (the header was parsed already)."""
    nc, kept = meta.num_chunks(p), meta.num_kept(p)
    scales = np.frombuffer(view[pos : pos + 4 * nc], dtype="<f4")
    if not np.isfinite(scales).all() or (scales < 0).any():
        raise SparseCodecError(f"{meta.name}: scale is NaN, Inf or negative")
    pos += 4 * nc
    idx_len = _packed_len(kept, p.index_bits)
    offsets = unpack_bits(view[pos : pos + idx_len], kept, p.index_bits)
    codes = unpack_bits(
        view[pos + idx_len : pos + idx_len + _packed_len(kept, p.bits)], kept, p.bits
    )
    chunk_of = _chunk_ids(meta, p)
    positions = chunk_of * p.chunk_size + offsets
    if kept and int(positions.max()) >= meta.numel:
        raise SparseCodecError(f"{meta.name}: an index is outside its chunk")
    if kept > 1:
        same = chunk_of[1:] == chunk_of[:-1]
        if (offsets[1:][same] <= offsets[:-1][same]).any():
            raise SparseCodecError(f"{meta.name}: indices in a chunk are not strictly ascending")
    check_canonical(scales, chunk_of, offsets, codes, p, meta.name)
    return SparseBody(scales.astype(np.float32), chunk_of, positions, codes)


def check_canonical(
    scales: np.ndarray,
    chunk_of: np.ndarray,
    offsets: np.ndarray,
    codes: np.ndarray,
    p: SparseParams,
    name: str,
) -> None:
    """Refuse chunks the encoder never writes, so that no two byte strings decode to the
    same values: a chunk of scale 0 keeps its first entries with the zero code ``L/2``; any
    other scale is a normal float and its chunk holds a code at an end of the range (the
    largest kept magnitude; ``s`` with codes 1 and 2 would otherwise decode as ``s / 3``
    with 0 and 3)."""
    if codes.size == 0:
        return
    starts = np.arange(0, codes.size, p.k)  # every chunk keeps k entries but the last
    zero = scales == 0
    rank = np.arange(codes.size) - chunk_of * p.k  # an entry's place in its chunk
    in_zero = zero[chunk_of]
    if (codes[in_zero] != p.levels // 2).any() or (offsets[in_zero] != rank[in_zero]).any():
        raise SparseCodecError(f"{name}: a chunk of scale 0 is not the zero chunk's encoding")
    if (scales[~zero] < TINY).any():
        raise SparseCodecError(f"{name}: a subnormal scale (the encoder writes 0 there)")
    ends = (np.minimum.reduceat(codes, starts) == 0) | (
        np.maximum.reduceat(codes, starts) == p.levels - 1
    )
    if not ends[~zero].all():
        raise SparseCodecError(f"{name}: a chunk holds no code at an end of the range")


def densify(body: SparseBody, meta: SparseMeta, p: SparseParams) -> Tensor:
    """The dense float32 tensor of one body (zeros where nothing was sent)."""
    dense = np.zeros(meta.numel, dtype=np.float32)
    dense[body.positions] = dequantize_values(body.scales[body.chunk_of], body.codes, p)
    return torch.from_numpy(dense).reshape(meta.shape)


def iter_decode_sparse(
    data: bytes,
    expected: Sequence[tuple[str, tuple[int, ...]]] | None = None,
    params: SparseParams | None = None,
) -> Iterator[tuple[str, Tensor]]:
    """Validate the header (names/shapes and parameters if given), then yield tensors."""
    p, metas, pos = _checked_header(data, expected, params)
    view = memoryview(data)
    for meta in metas:
        body = read_body(view, pos, meta, p)
        pos += meta.body_size(p)
        yield meta.name, densify(body, meta, p)


def decode_sparse(
    data: bytes,
    expected: Sequence[tuple[str, tuple[int, ...]]] | None = None,
    params: SparseParams | None = None,
) -> dict[str, Tensor]:
    """Decode a whole sparse update (see :func:`iter_decode_sparse`)."""
    return dict(iter_decode_sparse(data, expected, params))


def sparse_norm_terms(
    data: bytes, expected: Sequence[tuple[str, tuple[int, ...]]], params: SparseParams
) -> list[float]:
    """Per-chunk exact squared norms ``s^2/4 * sum((2c - L + 1)^2)`` for ``math.fsum``.

    The inner sum is an exact integer and ``s^2`` is exact in float64, so each term is one
    rounding and the total does not depend on summation order or threads.
    """
    p, metas, pos = _checked_header(data, expected, params)
    view, terms = memoryview(data), []
    for meta in metas:
        body = read_body(view, pos, meta, p)
        pos += meta.body_size(p)
        odd = (2 * body.codes - p.levels + 1) ** 2
        sums = np.zeros(meta.num_chunks(p), dtype=np.int64)
        np.add.at(sums, body.chunk_of, odd)
        s = body.scales.astype(np.float64)
        terms += (s * s * sums.astype(np.float64) / 4.0).tolist()
    return terms
