"""Canonical Huffman coding of small-alphabet codes, defined bit for bit (no library's heuristics).

The blockwise codecs' codes (``trainer.codec``) are far from uniform: at 4 bits a real
pseudo-gradient's codes carry about 3.3 bits of information each, at 2 bits about 1.3.
This module codes a sequence of symbols ``0 .. alphabet - 1`` so that the bytes are a
function of the symbols alone, hence the same on every machine and re-derivable by an
auditor:

* **Code lengths** come from the symbols' counts by Huffman's construction with ties
  broken by creation order (a leaf's order is its symbol, a merged node's follows every
  leaf); a symbol that never occurs has length 0. When only one symbol occurs it gets
  length 1 (the code ``0``).
* **Codes** are canonical: symbols sorted by (length, symbol) take consecutive integers,
  left-shifted when the length grows. A code's first bit is the stream's next bit.
* **The stream** numbers its bits from the least significant bit of its first byte; the
  symbols are cut into chunks of :data:`CHUNK` (the last may be shorter), and each
  chunk's bit length is stored so that a decoder runs all chunks in lockstep. Bits after
  the last code up to the byte boundary are zero.

Layout: ``u8 lengths[alphabet] | u16 chunk_bits[ceil(n / CHUNK)] | stream``. A decoder
refuses lengths that are not those of the decoded symbols' counts, a chunk that does not
end exactly where its length says, a bit pattern that is no code, and non-zero padding,
with :class:`CodecError`, so every accepted byte string is the one :func:`encode` makes.
"""

from __future__ import annotations

import heapq

import numpy as np

from hypertrain.trainer.errors import CodecError

# Symbols per independently decodable chunk: a decoder takes CHUNK lockstep steps over all
# chunks at once, and each chunk costs a u16 of its bit length (at most
# CHUNK * (MAX_ALPHABET - 1) bits), half a percent of a 4-bit update's coded size.
CHUNK = 1024
# The largest alphabet (codes up to MAX_ALPHABET - 1 bits long, decoded through one table
# of 2 ** (MAX_ALPHABET - 1) entries): the 4-bit codec's 15 codes fit, 8-bit codes do not.
MAX_ALPHABET = 16


def code_lengths(counts: np.ndarray) -> list[int]:
    """Huffman code lengths of symbols with these counts (ties by creation order)."""
    present = [s for s in range(counts.size) if counts[s] > 0]
    lengths = [0] * counts.size
    if len(present) == 1:
        lengths[present[0]] = 1
    if len(present) <= 1:
        return lengths
    # heap entries: (count, order, symbols under the node)
    heap = [(int(counts[s]), s, [s]) for s in present]
    heapq.heapify(heap)
    order = counts.size
    while len(heap) > 1:
        c1, _, left = heapq.heappop(heap)
        c2, _, right = heapq.heappop(heap)
        for s in left + right:
            lengths[s] += 1
        heapq.heappush(heap, (c1 + c2, order, left + right))
        order += 1
    return lengths


def _codes(lengths: list[int]) -> list[int]:
    """Canonical codes (first bit most significant) of the lengths; refuses lengths whose
    codes would not fit (an over-full code)."""
    codes = [0] * len(lengths)
    code, previous = 0, 0
    for length, symbol in sorted((n, s) for s, n in enumerate(lengths) if n > 0):
        code <<= length - previous
        if code >> length:
            raise CodecError("entropy code lengths do not form a prefix code")
        codes[symbol], previous = code, length
        code += 1
    return codes


def _reversed(code: int, length: int) -> int:
    """The code with its first bit at the least significant end (the stream's order)."""
    return int(format(code, f"0{length}b")[::-1], 2)


def encode(symbols: np.ndarray, alphabet: int) -> bytes:
    """The canonical encoding of ``symbols`` (integers in ``[0, alphabet)``)."""
    if not 1 <= alphabet <= MAX_ALPHABET:
        raise CodecError(f"the entropy coder takes alphabets of 1 to {MAX_ALPHABET} symbols")
    symbols = np.asarray(symbols, dtype=np.int64)
    if symbols.size and (symbols.min() < 0 or symbols.max() >= alphabet):
        raise CodecError(f"entropy coder got a symbol outside [0, {alphabet})")
    lengths = code_lengths(np.bincount(symbols, minlength=alphabet))
    codes = _codes(lengths)
    # Every code's bits in stream order, end to end; the stream gathers them per symbol.
    pattern = [
        (c >> (n - 1 - j)) & 1 for c, n in zip(codes, lengths, strict=True) for j in range(n)
    ]
    first = np.cumsum([0, *lengths[:-1]])
    width = np.array(lengths, dtype=np.int64)[symbols]
    ends = np.cumsum(width)
    total = int(ends[-1]) if symbols.size else 0
    within = np.arange(total, dtype=np.int64) - np.repeat(ends - width, width)
    bits = np.array(pattern, dtype=np.uint8)[np.repeat(first[symbols], width) + within]
    chunk_bits = np.zeros(0, dtype=np.int64)
    if symbols.size:
        chunk_bits = np.add.reduceat(width, np.arange(0, symbols.size, CHUNK))
    table = bytes(lengths) + chunk_bits.astype("<u2").tobytes()
    return table + np.packbits(bits, bitorder="little").tobytes()  # zero-padded to a byte


def stream_size(raw: memoryview, n: int, alphabet: int) -> int:
    """The whole encoding's length, read from its tables (for a container's length check);
    :class:`CodecError` when they are truncated."""
    chunks = -(-n // CHUNK)
    head = alphabet + 2 * chunks
    if len(raw) < head:
        raise CodecError("entropy-coded codes are truncated")
    chunk_bits = np.frombuffer(raw[alphabet:head], dtype="<u2").astype(np.int64)
    return head + -(-int(chunk_bits.sum()) // 8)


def decode(raw: memoryview, n: int, alphabet: int) -> np.ndarray:
    """The ``n`` symbols of an encoding of exactly ``len(raw)`` bytes (see the module
    docstring for what is refused)."""
    if not 1 <= alphabet <= MAX_ALPHABET:
        raise CodecError(f"the entropy coder takes alphabets of 1 to {MAX_ALPHABET} symbols")
    if len(raw) != stream_size(raw, n, alphabet):
        raise CodecError("entropy-coded codes have the wrong length")
    lengths = list(raw[:alphabet])
    top = max(lengths, default=0)
    if top > max(alphabet - 1, 1):
        raise CodecError(f"entropy code length {top} is longer than any Huffman code's")
    codes = _codes(lengths)
    chunks = -(-n // CHUNK)
    head = alphabet + 2 * chunks
    chunk_bits = np.frombuffer(raw[alphabet:head], dtype="<u2").astype(np.int64)
    if n == 0:
        if top or len(raw) != head:
            raise CodecError("entropy-coded codes of no symbols carry a code")
        return np.zeros(0, dtype=np.int64)
    if top == 0:
        raise CodecError("entropy code has no symbols")
    # Every symbol takes between the shortest and the longest code's bits, so a stream too
    # short for its count is refused before any work in proportion to the claimed count.
    sizes = np.full(chunks, CHUNK, dtype=np.int64)
    sizes[-1] = n - (chunks - 1) * CHUNK
    shortest = min(length for length in lengths if length)
    if (chunk_bits < shortest * sizes).any() or (chunk_bits > top * sizes).any():
        raise CodecError("an entropy-coded chunk's length does not fit its symbols' codes")
    # Windows of `top` bits, first stream bit lowest, map to (symbol, length); 0: no code.
    sym_of = np.zeros(1 << top, dtype=np.int64)
    len_of = np.zeros(1 << top, dtype=np.int64)
    for s, length in enumerate(lengths):
        if length:
            r = _reversed(codes[s], length)
            sym_of[r :: 1 << length], len_of[r :: 1 << length] = s, length
    stream = np.frombuffer(raw[head:], dtype=np.uint8)
    padded = np.concatenate([stream, np.zeros(3, dtype=np.uint8)]).astype(np.int64)
    ends = np.cumsum(chunk_bits)
    pos = ends - chunk_bits
    out = np.zeros((CHUNK, chunks), dtype=np.int64)
    last = n - (chunks - 1) * CHUNK
    mask, live = (1 << top) - 1, chunks
    for step in range(CHUNK if chunks > 1 else last):
        if step == last:  # the short last chunk is done
            live = chunks - 1
        p = pos[:live]
        byte = np.minimum(p >> 3, stream.size)  # a chunk overrunning the stream reads zeros
        window = ((padded[byte] | padded[byte + 1] << 8 | padded[byte + 2] << 16) >> (p & 7)) & mask
        width = len_of[window]
        if not width.all():
            raise CodecError("entropy-coded codes contain a bit pattern that is no code")
        out[step, :live] = sym_of[window]
        pos[:live] = p + width
    if not np.array_equal(pos, ends):
        raise CodecError("an entropy-coded chunk does not end where its length says")
    symbols = np.concatenate([out[:, : chunks - 1].T.reshape(-1), out[:last, chunks - 1]])
    total = int(ends[-1])
    if stream.size and total % 8 and int(stream[-1]) >> (total % 8):
        raise CodecError("padding bits after the entropy-coded codes are not zero")
    if code_lengths(np.bincount(symbols, minlength=alphabet)) != lengths:
        raise CodecError("entropy code lengths are not those of the coded symbols")
    return symbols
