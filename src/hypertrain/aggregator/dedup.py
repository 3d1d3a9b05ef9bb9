"""Duplicate and near-duplicate updates: one round merges each direction once.

Commits are public while a round trains, so an island could copy another's update (or
a rescaled copy of it) and claim a second share. Two updates are the *same work* when

* their hashes are equal (``duplicate_update``), or
* their cosine similarity after normalisation is above :data:`NEAR_DUPLICATE_COSINE`
  (``near_duplicate``): a rescaled copy has cosine 1 exactly, a copy with a little
  noise added stays close to 1, while independently trained updates from the same
  start model (different data) sit far below it.

The earliest commit keeps the direction; every later one is excluded and earns nothing.

Comparing every pair exactly would hold all updates in memory; instead pass 1 computes
a :data:`SKETCH_DIM`-dimensional sign-projection sketch of each update from its int8
codes (exact integer sums per block). Only a pair whose sketch cosine exceeds
:data:`SKETCH_COSINE` (well below the threshold: a true cosine of 0.99 gives a sketch
cosine within about 0.01 of it) is compared exactly: per block the product of the two
code vectors is an exact integer, scaled once, and ``math.fsum`` rounds the sum once, so
the exact cosine, too, does not depend on the machine.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Final

import numpy as np

from hypertrain.aggregator.blobs import BlobSource
from hypertrain.protocol.manifest import CompressionSpec
from hypertrain.trainer.codec import iter_decode, parse_header
from hypertrain.trainer.update import iter_decode_update

NEAR_DUPLICATE_COSINE: Final = 0.99
SKETCH_COSINE: Final = 0.9
SKETCH_DIM: Final = 32
_FLOAT32_BLOCKS: Final = 1024

Shapes = Sequence[tuple[str, tuple[int, ...]]]


@lru_cache(maxsize=4)
def _signs(block_size: int) -> np.ndarray:
    """A fixed ``block_size x SKETCH_DIM`` matrix of +-1 derived from SHA-256."""
    need = block_size * SKETCH_DIM
    stream = bytearray()
    counter = 0
    while len(stream) * 8 < need:
        stream += hashlib.sha256(
            b"hypertrain/v1/update-sketch" + counter.to_bytes(8, "big")
        ).digest()
        counter += 1
    bits = np.unpackbits(np.frombuffer(bytes(stream), dtype=np.uint8))[:need]
    dtype = np.float32 if block_size <= _FLOAT32_BLOCKS else np.float64
    return (bits.astype(dtype) * 2 - 1).reshape(block_size, SKETCH_DIM)


def sketch(data: bytes, compression: CompressionSpec | None = None) -> tuple[float, ...]:
    """The update's sign-projection sketch (call only on an update that validated).

    Sparse updates have no sketch (an empty tuple): every pair of them is compared
    exactly (:func:`sparse_cosine`), which is cheap because they carry a few percent of
    the values.

    Per block, ``codes @ signs`` sums at most ``block_size`` integers of magnitude
    <= 127, so float32 holds it exactly whatever the summation order; each
    block's value is scaled once and the blocks are summed. The sketch only selects
    pairs for the exact comparison, and a pair whose exact cosine exceeds the threshold
    has a sketch cosine far above :data:`SKETCH_COSINE`, so the last bits of this sum
    cannot change any decision.
    """
    if compression is not None and compression.sparse is not None:
        return ()
    block_size, blocks = _blocks(data)
    signs = _signs(block_size)
    total = np.zeros(SKETCH_DIM, dtype=np.float64)
    for scales, q in blocks:
        total += ((q @ signs).astype(np.float64) * scales[:, None]).sum(axis=0)
    return tuple(float(x) for x in total)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    na, nb = math.fsum(x * x for x in a), math.fsum(y * y for y in b)
    return dot / math.sqrt(na * nb) if na > 0 and nb > 0 else 0.0


def _blocks(data: bytes) -> tuple[int, list[tuple[np.ndarray, np.ndarray]]]:
    """(block size, per tensor: float64 scales and the codes as blocks of floats).

    Every sum of code products within one block is an integer of magnitude at most
    ``block_size * 127 * 127``: below 2^24 for blocks of up to 1024 codes, which are
    therefore held in float32 (exact in any summation order), larger ones in float64.
    """
    block_size, metas, pos = parse_header(data)
    dtype = np.float32 if block_size <= _FLOAT32_BLOCKS else np.float64
    view = memoryview(data)
    out: list[tuple[np.ndarray, np.ndarray]] = []
    for meta in metas:
        nb = -(-meta.numel // block_size)
        scales = np.frombuffer(view[pos : pos + 4 * nb], dtype="<f4").astype(np.float64)
        codes = np.frombuffer(view[pos + 4 * nb : pos + 4 * nb + meta.numel], dtype=np.int8)
        pos += meta.body_size(block_size)
        padded = np.zeros(nb * block_size, dtype=dtype)
        padded[: meta.numel] = codes
        out.append((scales, padded.reshape(nb, block_size)))
    return block_size, out


def sparse_cosine(a: bytes, b: bytes, shapes: Shapes, compression: CompressionSpec) -> float:
    """Cosine of two decoded sparse updates, rounded once (machine-independent): each
    product of two float32 values is exact in float64 and ``math.fsum`` sums them."""
    dots: list[float] = []
    aa: list[float] = []
    bb: list[float] = []
    pairs = zip(
        iter_decode_update(a, compression, shapes),
        iter_decode_update(b, compression, shapes),
        strict=True,
    )
    for (_, ta), (_, tb) in pairs:
        xa = ta.numpy().astype(np.float64).ravel()
        xb = tb.numpy().astype(np.float64).ravel()
        nz = (xa != 0) | (xb != 0)
        xa, xb = xa[nz], xb[nz]
        dots.extend((xa * xb).tolist())
        aa.extend((xa * xa).tolist())
        bb.extend((xb * xb).tolist())
    na, nb = math.fsum(aa), math.fsum(bb)
    return math.fsum(dots) / math.sqrt(na * nb) if na > 0 and nb > 0 else 0.0


def exact_cosine(
    a: bytes, b: bytes, shapes: Shapes, compression: CompressionSpec | None = None
) -> float:
    """Cosine of two validated updates (sparse ones: :func:`sparse_cosine`).

    With equal block sizes (the run's ``compression.block_size``) it is exact up to one
    final rounding: per block, ``codes_a . codes_b`` is an integer that float64 holds
    exactly, it is scaled once, and the blocks are summed with ``math.fsum``. Updates
    encoded with different block sizes are compared on their decoded float32 values in
    float64 (a copy re-encoded with another block size is still caught).
    """
    if compression is not None and compression.sparse is not None:
        return sparse_cosine(a, b, shapes, compression)
    size_a, blocks_a = _blocks(a)
    size_b, blocks_b = _blocks(b)
    if size_a != size_b:
        return _float_cosine(a, b, shapes)
    dots: list[float] = []
    norm_a: list[float] = []
    norm_b: list[float] = []
    for (sa, qa), (sb, qb) in zip(blocks_a, blocks_b, strict=True):
        dots += ((qa * qb).sum(axis=1).astype(np.float64) * (sa * sb)).tolist()
        norm_a += ((qa * qa).sum(axis=1).astype(np.float64) * (sa * sa)).tolist()
        norm_b += ((qb * qb).sum(axis=1).astype(np.float64) * (sb * sb)).tolist()
    na, nb = math.fsum(norm_a), math.fsum(norm_b)
    if na <= 0 or nb <= 0:
        return 0.0
    return math.fsum(dots) / math.sqrt(na * nb)


def _float_cosine(a: bytes, b: bytes, shapes: Shapes) -> float:
    dot = na = nb = 0.0
    for (_, ta), (_, tb) in zip(iter_decode(a, shapes), iter_decode(b, shapes), strict=True):
        xa = ta.numpy().astype(np.float64).ravel()
        xb = tb.numpy().astype(np.float64).ravel()
        dot += float(xa @ xb)
        na += float(xa @ xa)
        nb += float(xb @ xb)
    return dot / math.sqrt(na * nb) if na > 0 and nb > 0 else 0.0


def find_duplicates(
    order: Sequence[tuple[str, str]],
    sketches: dict[str, tuple[float, ...]],
    blobs: BlobSource,
    shapes: Shapes,
    compression: CompressionSpec | None = None,
) -> dict[str, tuple[str, str]]:
    """hotkey -> (reason, detail) for each later copy, given ``(hotkey, sha)`` in commit order.

    Only hotkeys with a sketch (their update validated) take part.
    """
    kept: list[tuple[str, str]] = []
    out: dict[str, tuple[str, str]] = {}
    for hotkey, sha in order:
        if hotkey not in sketches:
            continue
        found: tuple[str, str] | None = None
        for first, first_sha in kept:
            if sha == first_sha:
                found = ("duplicate_update", f"the same update as {first}'s earlier commit")
                break
            sketched = bool(sketches[hotkey]) and bool(sketches[first])
            if sketched and _cosine(sketches[hotkey], sketches[first]) <= SKETCH_COSINE:
                continue
            cos = exact_cosine(blobs.get(sha), blobs.get(first_sha), shapes, compression)
            if cos > NEAR_DUPLICATE_COSINE:
                found = (
                    "near_duplicate",
                    f"cosine {cos:.6f} with {first}'s earlier update"
                    f" (threshold {NEAR_DUPLICATE_COSINE})",
                )
                break
        if found is None:
            kept.append((hotkey, sha))
        else:
            out[hotkey] = found
    return out
