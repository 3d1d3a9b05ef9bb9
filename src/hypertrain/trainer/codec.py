"""Blockwise absmax codecs for pseudo-gradients (8, 4 or 2 bits), with a canonical encoding.

Each tensor is flattened (C order) and cut into blocks of ``block_size`` elements (the
last block may be short). With ``b`` bits a code is an integer in ``[-Q, Q]``,
``Q = 2 ** (b - 1) - 1`` (127, 7 or 1): per block, ``scale = absmax / Q`` (float32) and
``q = clamp(round_half_even(x / scale), -Q, Q)`` (q = 0 where scale = 0). Decoding is
``q * scale``. Every operation is elementwise or an exact max, so the bytes do not depend
on thread count. Layout (all integers little-endian):

    header:  magic | u16 version | u32 block_size | u32 tensor count
             per tensor: u16 name length | name | u8 dtype code | u8 ndim | u64 dims...
    bodies:  per tensor, in header order: f32 scales[ceil(n / block_size)] | codes

The magic names the width: "HTQ8" (codes: int8 ``q[n]``, the first format, unchanged),
"HTQ4" and "HTQ2" (codes: ``q + Q`` as unsigned ``b``-bit fields packed low bits first,
``8 / b`` to a byte, ``ceil(n * b / 8)`` bytes, unused bits of the last byte zero).

"HTE4" and "HTE2" are the same codes entropy coded (``trainer.entropy``, canonical
Huffman over the ``2Q + 1`` values ``q + Q``): every tensor's scales, in header order,
then one entropy-coded section of all tensors' codes, in header order. A real 4-bit
pseudo-gradient's codes take about 3.3 bits each there.

The whole header comes first (its tensor table, shared with the sparse codec, is
update_header.py's), so the exact total length is known before any body is read (for the
entropy-coded formats, from the header and the entropy section's own tables): a
decoder refuses a wrong length, a bad header, a non-finite or negative scale, a code
outside ``[-Q, Q]`` (int8's -128, the packed field ``2Q + 1``) or non-zero padding bits
with :class:`CodecError`. :func:`iter_blocks` yields each tensor's scales and integer
codes (the aggregator's exact norms and Gram products read them), :func:`iter_decode`
each decoded tensor, one at a time, for aggregators that stream many updates.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from hypertrain.protocol import domains
from hypertrain.trainer import entropy as entropy_coder
from hypertrain.trainer.errors import CodecError
from hypertrain.trainer.update_header import check_tensors, entry_bytes, read_fixed, read_tensors

MAGIC = b"HTQ8"  # the int8 format's
VERSION = 1
HEADER = struct.Struct("<4sHII")
MAGICS = {8: b"HTQ8", 4: b"HTQ4", 2: b"HTQ2"}  # code width -> magic
CODED_MAGICS = {4: b"HTE4", 2: b"HTE2"}  # code width -> magic of the entropy-coded format
# magic -> (code width, entropy coded)
FORMATS = {m: (b, False) for b, m in MAGICS.items()} | {
    m: (b, True) for b, m in CODED_MAGICS.items()
}
# The smallest normal float32: a scale below it is written as 0 (a subnormal scale's
# rounding could leave a block without a code of magnitude Q, see check_canonical).
TINY = float(np.finfo(np.float32).tiny)


def alphabet(bits: int) -> int:
    """The entropy coder's alphabet at ``bits``: the ``2Q + 1`` codes, as ``q + Q``."""
    return 2 * levels(bits) + 1


def levels(bits: int) -> int:
    """``Q``: the largest code of a ``bits``-wide format (127, 7, 1)."""
    if bits not in MAGICS:
        raise CodecError(f"codes are 8, 4 or 2 bits wide, not {bits}")
    return (1 << (bits - 1)) - 1


@dataclass(frozen=True, slots=True)
class TensorMeta:
    name: str
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def code_bytes(self, bits: int = 8) -> int:
        return -(-self.numel * bits // 8)

    def scale_bytes(self, block_size: int) -> int:
        return 4 * -(-self.numel // block_size)

    def body_size(self, block_size: int, bits: int = 8) -> int:
        return self.scale_bytes(block_size) + self.code_bytes(bits)


def update_hash(data: bytes) -> bytes:
    """``tagged_hash(UPDATE, encoded update)``."""
    return domains.tagged_hash(domains.UPDATE, data)


def quantize(x: Tensor, block_size: int, bits: int = 8) -> tuple[Tensor, Tensor]:
    """(float32 scales, int8 codes in ``[-Q, Q]``) of a tensor; refuses non-finite input."""
    top = levels(bits)
    flat = x.detach().to(torch.float32).reshape(-1).cpu()
    if not bool(torch.isfinite(flat).all()):
        raise CodecError("cannot encode a tensor with NaN or Inf")
    n = flat.numel()
    pad = -n % block_size
    blocks = torch.nn.functional.pad(flat, (0, pad)).view(-1, block_size)
    scales = blocks.abs().amax(dim=1) / float(top)  # (num_blocks,)
    scales = torch.where(scales >= TINY, scales, torch.zeros_like(scales))  # no subnormal
    safe = torch.where(scales > 0, scales, torch.ones_like(scales))
    q = torch.round(blocks / safe[:, None]).clamp_(-top, top)
    q = torch.where(scales[:, None] > 0, q, torch.zeros_like(q))
    return scales, q.to(torch.int8).reshape(-1)[:n]


def dequantize(scales: Tensor, q: Tensor, block_size: int, shape: tuple[int, ...]) -> Tensor:
    per_elem = scales.repeat_interleave(block_size)[: q.numel()]
    return (q.to(torch.float32) * per_elem).reshape(shape)


def pack_codes(q: Tensor, bits: int) -> bytes:
    """The body's code bytes of int8 codes ``q`` (see the module docstring)."""
    codes = q.numpy()
    if bits == 8:
        return codes.tobytes()
    per = 8 // bits
    fields = (codes.astype(np.int16) + levels(bits)).astype(np.uint8)
    fields = np.pad(fields, (0, -fields.size % per)).reshape(-1, per)
    shifts = np.arange(per, dtype=np.uint8) * bits
    packed: np.ndarray = np.bitwise_or.reduce(fields << shifts, axis=1).astype(np.uint8)
    return packed.tobytes()


def unpack_codes(raw: memoryview, numel: int, bits: int, name: str) -> np.ndarray:
    """The int8 codes of one tensor's code bytes, refusing codes outside ``[-Q, Q]`` and
    non-zero padding bits."""
    if bits == 8:
        codes = np.frombuffer(raw, dtype=np.int8)
        if (codes == -128).any():
            raise CodecError(f"{name}: code -128 never occurs in a canonical update")
        return codes
    per, top = 8 // bits, levels(bits)
    packed = np.frombuffer(raw, dtype=np.uint8)
    shifts = np.arange(per, dtype=np.uint8) * bits
    fields = ((packed[:, None] >> shifts) & ((1 << bits) - 1)).reshape(-1)
    if fields[numel:].any():
        raise CodecError(f"{name}: padding bits of the last code byte are not zero")
    fields = fields[:numel]
    if (fields > 2 * top).any():
        raise CodecError(f"{name}: code {2 * top + 1} never occurs in a canonical update")
    return (fields.astype(np.int16) - top).astype(np.int8)


def encode_quantized(
    tensors: Mapping[str, Tensor], block_size: int, bits: int = 8, entropy: bool = False
) -> bytes:
    """Canonical ``bits``-wide encoding of named tensors (order = mapping order), its codes
    entropy coded when ``entropy`` (4 and 2 bits only)."""
    if block_size < 1:
        raise CodecError(f"block size must be positive, got {block_size}")
    magic = (CODED_MAGICS if entropy else MAGICS).get(bits)
    if magic is None:
        widths = "4 or 2" if entropy else "8, 4 or 2"
        raise CodecError(
            f"{'entropy-coded ' if entropy else ''}codes are {widths} bits wide, not {bits}"
        )
    header = [HEADER.pack(magic, VERSION, block_size, len(tensors))]
    bodies: list[bytes] = []
    codes: list[np.ndarray] = []
    for name, t in tensors.items():
        header.append(entry_bytes(name, tuple(t.shape)))
        scales, q = quantize(t, block_size, bits)
        bodies.append(scales.numpy().tobytes())
        if entropy:
            codes.append(q.numpy().astype(np.int64) + levels(bits))
        else:
            bodies.append(pack_codes(q, bits))
    if entropy:
        symbols = np.concatenate(codes) if codes else np.zeros(0, dtype=np.int64)
        bodies.append(entropy_coder.encode(symbols, alphabet(bits)))
    return b"".join(header + bodies)


def encode_int8(tensors: Mapping[str, Tensor], block_size: int) -> bytes:
    """The 8-bit encoding (``HTQ8``): :func:`encode_quantized` at 8 bits."""
    return encode_quantized(tensors, block_size, 8)


def code_format(data: bytes) -> tuple[int, bool]:
    """(code width, entropy coded) of an update's magic; :class:`CodecError` for another
    format."""
    if len(data) < HEADER.size:
        raise CodecError(f"update is truncated ({len(data)} bytes)")
    found = FORMATS.get(bytes(data[:4]))
    if found is None:
        raise CodecError(f"not a blockwise update (magic {bytes(data[:4])!r})")
    return found


def code_bits(data: bytes) -> int:
    """The code width an update's magic names; :class:`CodecError` for another format."""
    return code_format(data)[0]


def check_format(data: bytes, bits: int, entropy: bool) -> None:
    """Refuse an update whose codes are not ``bits`` wide or not (``entropy``) entropy
    coded, with :class:`CodecError`."""
    found_bits, found_entropy = code_format(data)
    if found_bits != bits:
        raise CodecError(f"{found_bits}-bit codes, the run's are {bits}-bit")
    if found_entropy != entropy:
        raise CodecError(
            f"codes {'' if found_entropy else 'not '}entropy coded, the run's are"
            f"{'' if entropy else ' not'}"
        )


def parse_header(data: bytes) -> tuple[int, list[TensorMeta], int]:
    """(block size, tensor metas, offset of the first body) of an update of any format
    (:func:`code_format` gives it); checks the exact total length."""
    bits, coded = code_format(data)
    magic = (CODED_MAGICS if coded else MAGICS)[bits]
    block_size, count = read_fixed(data, HEADER, magic, VERSION, f"{bits}-bit", CodecError)
    if block_size < 1:
        raise CodecError(f"bad header: block size {block_size}")
    metas, pos = read_tensors(
        data,
        HEADER.size,
        count,
        TensorMeta,
        lambda m: m.scale_bytes(block_size) if coded else m.body_size(block_size, bits),
        CodecError,
        (lambda metas, end: _section_size(data, metas, end, bits)) if coded else None,
    )
    return block_size, metas, pos


def _section_size(data: bytes, metas: list[TensorMeta], end: int, bits: int) -> int:
    """The entropy section's size, read from its own tables at the end of the scales."""
    numel = sum(m.numel for m in metas)
    return entropy_coder.stream_size(memoryview(data)[end:], numel, alphabet(bits))


def iter_blocks(
    data: bytes, expected: Sequence[tuple[str, tuple[int, ...]]] | None = None
) -> Iterator[tuple[TensorMeta, np.ndarray, np.ndarray]]:
    """Validate the header (and names/shapes if ``expected``), then yield each tensor's
    (meta, float32 scales, int8 codes), every scale and code checked, without decoding."""
    block_size, metas, pos = parse_header(data)
    bits, coded = code_format(data)
    check_tensors(metas, expected, CodecError)
    view = memoryview(data)
    if coded:  # every scale first, then all codes in one entropy section
        section = view[pos + sum(m.scale_bytes(block_size) for m in metas) :]
        codes_all = _entropy_codes(bytes(section), sum(m.numel for m in metas), bits)
        all_codes = np.split(codes_all, np.cumsum([m.numel for m in metas])[:-1])
    for i, meta in enumerate(metas):
        start = pos + meta.scale_bytes(block_size)
        scales = np.frombuffer(view[pos:start], dtype="<f4")
        if coded:
            codes, pos = all_codes[i], start
        else:
            codes = unpack_codes(view[start : start + meta.code_bytes(bits)], meta.numel, bits,
                                 meta.name)  # fmt: skip
            pos += meta.body_size(block_size, bits)
        if not np.isfinite(scales).all():
            raise CodecError(f"{meta.name}: a scale is NaN or Inf")
        if (scales < 0).any():
            raise CodecError(f"{meta.name}: negative scale")
        check_canonical(scales, codes, block_size, levels(bits), meta.name)
        yield meta, scales, codes


def check_canonical(
    scales: np.ndarray, codes: np.ndarray, block_size: int, top: int, name: str
) -> None:
    """Refuse blocks the encoder never writes, so that no two byte strings decode to the
    same values: a scale of 0 carries only zero codes; any other scale is a normal float
    and its block holds a code of magnitude ``top`` (the block's absmax element; a scale
    ``s`` with codes ``q`` would otherwise decode as ``s / 2`` with ``2q``)."""
    if codes.size == 0:
        return
    peaks = np.maximum.reduceat(
        np.abs(codes.astype(np.int16)), np.arange(0, codes.size, block_size)
    )
    zero = scales == 0
    if (peaks[zero] != 0).any():
        raise CodecError(f"{name}: a block of scale 0 carries non-zero codes")
    if (scales[~zero] < TINY).any():
        raise CodecError(f"{name}: a subnormal scale (the encoder writes 0 there)")
    if (peaks[~zero] != top).any():
        raise CodecError(f"{name}: a block's largest code is not {top} (not its absmax)")


# The aggregator reads each coded update three times (its norm, the Gram matrix, the
# merge's sum); decoding an entropy section dominates each read, so the last few decoded
# sections are kept, keyed by their bytes (a refused section raises and is not kept).
DECODED_SECTIONS = 8


@functools.lru_cache(maxsize=DECODED_SECTIONS)
def _entropy_codes(section: bytes, numel: int, bits: int) -> np.ndarray:
    """The ``numel`` int8 codes of an entropy section (read-only: callers share it)."""
    codes = entropy_coder.decode(memoryview(section), numel, alphabet(bits)) - levels(bits)
    codes = codes.astype(np.int8)
    codes.flags.writeable = False
    return codes


def iter_decode(
    data: bytes, expected: Sequence[tuple[str, tuple[int, ...]]] | None = None
) -> Iterator[tuple[str, Tensor]]:
    """Validate the header (and names/shapes if ``expected``), then yield tensors one by one."""
    block_size = parse_header(data)[0]
    for meta, scales, codes in iter_blocks(data, expected):
        s, q = torch.from_numpy(scales.copy()), torch.from_numpy(codes.copy())
        yield meta.name, dequantize(s, q, block_size, meta.shape)


def decode_quantized(
    data: bytes, expected: Sequence[tuple[str, tuple[int, ...]]] | None = None
) -> dict[str, Tensor]:
    """Decode a whole update of any width (see :func:`iter_decode`)."""
    return dict(iter_decode(data, expected))


def decode_int8(
    data: bytes, expected: Sequence[tuple[str, tuple[int, ...]]] | None = None
) -> dict[str, Tensor]:
    """Decode a whole 8-bit update; another width is refused."""
    if code_bits(data) != 8:
        raise CodecError(f"not an int8 update (magic {bytes(data[:4])!r})")
    return decode_quantized(data, expected)


def relative_l2(original: Mapping[str, Tensor], decoded: Mapping[str, Tensor]) -> float:
    """``||x - x_hat|| / ||x||`` over all tensors together (float64 accumulation)."""
    err = sum(float((original[k].double() - decoded[k].double()).pow(2).sum()) for k in original)
    ref = sum(float(original[k].double().pow(2).sum()) for k in original)
    return math.sqrt(err / ref) if ref > 0 else math.sqrt(err)
