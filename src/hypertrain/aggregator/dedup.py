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
codes (integer arithmetic per block, then ``math.fsum`` per coordinate, so the sketch
is the same number on every machine). Only a pair whose sketch cosine exceeds
:data:`SKETCH_COSINE` (well below the threshold: a true cosine of 0.99 gives a sketch
cosine within about 0.01 of it) is compared exactly, by decoding both updates: each
product of two float32 values is exact in float64 and ``math.fsum`` rounds the sum once,
so the exact cosine, too, does not depend on the machine.
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
from hypertrain.trainer.codec import parse_header
from hypertrain.trainer.update import iter_decode_update

NEAR_DUPLICATE_COSINE: Final = 0.99
SKETCH_COSINE: Final = 0.9
SKETCH_DIM: Final = 64
_CHUNK_BLOCKS: Final = 4096

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
    return (bits.astype(np.int64) * 2 - 1).reshape(block_size, SKETCH_DIM)


def sketch(data: bytes, compression: CompressionSpec | None = None) -> tuple[float, ...]:
    """The update's sign-projection sketch (call only on an update that validated).

    Sparse updates have no sketch (an empty tuple): every pair of them is compared
    exactly, which is cheap because they decode from a few percent of the values.
    """
    if compression is not None and compression.sparse is not None:
        return ()
    block_size, metas, pos = parse_header(data)
    signs = _signs(block_size)
    view = memoryview(data)
    columns: list[list[float]] = [[] for _ in range(SKETCH_DIM)]
    for meta in metas:
        nb = -(-meta.numel // block_size)
        scales = np.frombuffer(view[pos : pos + 4 * nb], dtype="<f4").astype(np.float64)
        codes = np.frombuffer(view[pos + 4 * nb : pos + 4 * nb + meta.numel], dtype=np.int8)
        pos += meta.body_size(block_size)
        padded = np.pad(codes.astype(np.int64), (0, -meta.numel % block_size))
        blocks = padded.reshape(nb, block_size)
        for lo in range(0, nb, _CHUNK_BLOCKS):
            part = blocks[lo : lo + _CHUNK_BLOCKS] @ signs  # exact int64
            terms = part.astype(np.float64) * scales[lo : lo + _CHUNK_BLOCKS, None]
            for j in range(SKETCH_DIM):
                columns[j].extend(terms[:, j].tolist())
    return tuple(math.fsum(col) for col in columns)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    na, nb = math.fsum(x * x for x in a), math.fsum(y * y for y in b)
    return dot / math.sqrt(na * nb) if na > 0 and nb > 0 else 0.0


def exact_cosine(
    a: bytes, b: bytes, shapes: Shapes, compression: CompressionSpec | None = None
) -> float:
    """Cosine of two decoded updates, rounded once (machine-independent)."""
    dots: list[float] = []
    aa: list[float] = []
    bb: list[float] = []
    spec = compression or CompressionSpec()
    pairs = zip(
        iter_decode_update(a, spec, shapes), iter_decode_update(b, spec, shapes), strict=True
    )
    for (_, ta), (_, tb) in pairs:
        xa = ta.numpy().astype(np.float64).ravel()
        xb = tb.numpy().astype(np.float64).ravel()
        dots.extend((xa * xb).tolist())
        aa.extend((xa * xa).tolist())
        bb.extend((xb * xb).tolist())
    na, nb = math.fsum(aa), math.fsum(bb)
    if na <= 0 or nb <= 0:
        return 0.0
    return math.fsum(dots) / math.sqrt(na * nb)


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
