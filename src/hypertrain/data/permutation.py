"""A keyed pseudo-random permutation of ``[0, n)`` for any ``n >= 1``.

A balanced Feistel network on ``2h`` bits (the smallest even width with
``2**(2h) >= n``) is a bijection of ``[0, 2**(2h))``; *cycle walking* (apply it again
while the result is ``>= n``) restricts it to a bijection of ``[0, n)``. Because
``2**(2h) < 4n``, a walk takes fewer than four steps on average. Nothing of size
``n`` is ever materialised: one index costs O(1) time and memory.

Round keys come from SHA-256 (:data:`domains.PERMUTATION`) over the 32-byte key and
``n``; the round function is the murmur3 64-bit finaliser of ``right XOR round_key``,
truncated to ``h`` bits. The unpredictability the protocol needs comes from the key
(derived from beacon randomness revealed at round open), not from the round function,
which only has to mix well; an integer mixer lets :meth:`map_array` evaluate millions
of indices per second with numpy. All arithmetic is on ``uint64`` with wrap-around,
identical on every platform numpy supports.
"""

from __future__ import annotations

import struct
from typing import Final

import numpy as np
import numpy.typing as npt

from hypertrain.data.errors import AssignmentError
from hypertrain.protocol import domains

NUM_ROUNDS: Final = 8
MAX_DOMAIN: Final = 1 << 62
KEY_SIZE: Final = 32
_M1: Final = np.uint64(0xFF51AFD7ED558CCD)
_M2: Final = np.uint64(0xC4CEB9FE1A85EC53)
_S33: Final = np.uint64(33)

IndexArray = npt.NDArray[np.uint64]


def _fmix64(x: IndexArray) -> IndexArray:
    """murmur3's 64-bit finaliser (wrapping uint64 arithmetic, elementwise)."""
    x = x ^ (x >> _S33)
    x = x * _M1
    x = x ^ (x >> _S33)
    x = x * _M2
    return x ^ (x >> _S33)


def round_keys(key: bytes, n: int) -> tuple[int, ...]:
    """The :data:`NUM_ROUNDS` 64-bit round keys for permuting ``[0, n)`` under ``key``."""
    material = b""
    counter = 0
    while len(material) < 8 * NUM_ROUNDS:
        material += domains.tagged_hash(domains.PERMUTATION, key + struct.pack(">QI", n, counter))
        counter += 1
    return struct.unpack(f">{NUM_ROUNDS}Q", material[: 8 * NUM_ROUNDS])


class Permutation:
    """The permutation of ``[0, n)`` selected by a 32-byte ``key``."""

    __slots__ = ("_half_bits", "_keys", "_mask", "key", "n")

    def __init__(self, key: bytes, n: int) -> None:
        if len(key) != KEY_SIZE:
            raise AssignmentError(f"permutation key must be {KEY_SIZE} bytes, got {len(key)}")
        if not 1 <= n <= MAX_DOMAIN:
            raise AssignmentError(f"permutation domain size must be in [1, 2**62], got {n}")
        self.key = key
        self.n = n
        self._half_bits = max(1, ((n - 1).bit_length() + 1) // 2)
        self._mask = np.uint64((1 << self._half_bits) - 1)
        self._keys = tuple(np.uint64(k) for k in round_keys(key, n))

    def _feistel(self, x: IndexArray) -> IndexArray:
        shift = np.uint64(self._half_bits)
        left, right = x >> shift, x & self._mask
        for k in self._keys:
            left, right = right, left ^ (_fmix64(right ^ k) & self._mask)
        return (left << shift) | right

    def map_array(self, indices: npt.ArrayLike) -> IndexArray:
        """Images of many indices at once (each must be in ``[0, n)``)."""
        x = np.asarray(indices, dtype=np.uint64)
        if x.size and int(x.max()) >= self.n:
            raise AssignmentError(f"index {int(x.max())} out of range for n = {self.n}")
        out = self._feistel(x)
        pending = out >= np.uint64(self.n)
        while pending.any():  # cycle walking
            out[pending] = self._feistel(out[pending])
            pending = out >= np.uint64(self.n)
        return out

    def __call__(self, index: int) -> int:
        """The image of one index."""
        if not 0 <= index < self.n:
            raise AssignmentError(f"index {index} out of range for n = {self.n}")
        return int(self.map_array(np.array([index], dtype=np.uint64))[0])

    def range(self, start: int, stop: int) -> IndexArray:
        """Images of positions ``start .. stop-1``, in position order."""
        if not 0 <= start <= stop <= self.n:
            raise AssignmentError(f"range [{start}, {stop}) not within [0, {self.n})")
        return self.map_array(np.arange(start, stop, dtype=np.uint64))
