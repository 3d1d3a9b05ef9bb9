"""The Gram matrix of a round's updates: every inner product, the same on every machine.

Every robust decision of the merge (copies, updates pointing against the others, the
geometric median) is a function of the inner products ``<u_i, u_j>`` alone, so the
merge computes them once, exactly, and decides everything else in plain Python floats
(:mod:`hypertrain.aggregator.robust`).

*int8 updates* (all with the run's block size, which :func:`~hypertrain.aggregator.norms.
update_norm` enforces): per block, ``codes_i . codes_j`` is an integer (at most
``block_size * 127^2``), held exactly whatever the summation order or kernel (float32
below 2^24, float64 above), so one batched matrix product gives every pair's block
dots exactly; ``scale_i * scale_j`` of two float32 scales is exact in float64; their
product is one IEEE rounding. Per chunk of :data:`CHUNK_BLOCKS` blocks of a tensor the
terms are summed with ``math.fsum`` (correctly rounded, order-free) and the partial sums
again with ``math.fsum``.

*Sparse updates*: the decoded float32 values' products are exact in float64 and are
summed the same way over the coordinates either update sets.

Only the updates' encoded bytes are held (int8: a quarter of the model each) and one
tensor of each decoded at a time.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

from hypertrain.protocol.manifest import CompressionSpec
from hypertrain.trainer.codec import iter_blocks, parse_header
from hypertrain.trainer.update import iter_decode_update

Shapes = Sequence[tuple[str, tuple[int, ...]]]
Gram = list[list[float]]
_FLOAT32_BLOCKS = 1024
CHUNK_BLOCKS = 64  # blocks per batched product (bounds the scratch memory; fixed: it groups sums)


def gram_matrix(updates: Sequence[bytes], shapes: Shapes, compression: CompressionSpec) -> Gram:
    """``G[i][j] = <u_i, u_j>`` for validated updates of the run's codec."""
    n = len(updates)
    partials: list[list[list[float]]] = [[[] for _ in range(n)] for _ in range(n)]
    if compression.sparse is None:
        _int8_partials(updates, compression.block_size, partials)
    else:
        _sparse_partials(updates, shapes, compression, partials)
    gram = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            gram[i][j] = gram[j][i] = math.fsum(partials[i][j])
    return gram


def _int8_tensors(data: bytes, block_size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per tensor, lazily: float64 scales and the integer codes (any width)."""
    size = parse_header(data)[0]
    if size != block_size:  # update_norm refuses these first; a changed blob gets here
        raise ValueError(f"update block size {size}, the run's is {block_size}")
    for _, scales, codes in iter_blocks(data):
        yield scales.astype(np.float64), codes


def _chunk(codes: np.ndarray, lo: int, blocks: int, block_size: int) -> np.ndarray:
    """Blocks ``lo .. lo + blocks`` of one tensor's codes, zero-padded, as exact floats."""
    dtype = np.float32 if block_size <= _FLOAT32_BLOCKS else np.float64
    part = codes[lo * block_size : (lo + blocks) * block_size]
    out = np.zeros(blocks * block_size, dtype=dtype)
    out[: part.size] = part
    return out.reshape(blocks, block_size)


def _int8_partials(
    updates: Sequence[bytes], block_size: int, partials: list[list[list[float]]]
) -> None:
    """Per tensor and per chunk of :data:`CHUNK_BLOCKS` blocks: every pair's block dot
    products in one batched matrix product (exact: integer codes, exact partial sums),
    scaled and summed with ``math.fsum``. Only one chunk of each update is decoded."""
    streams = [_int8_tensors(data, block_size) for data in updates]
    n = len(updates)
    for tensors in zip(*streams, strict=True):
        scales = np.stack([s for s, _ in tensors], axis=1)  # blocks x n
        for lo in range(0, scales.shape[0], CHUNK_BLOCKS):
            s = scales[lo : lo + CHUNK_BLOCKS]
            q = np.stack([_chunk(c, lo, len(s), block_size) for _, c in tensors], axis=1)
            dots = np.matmul(q, q.transpose(0, 2, 1)).astype(np.float64)  # blocks x n x n
            terms = dots * (s[:, :, None] * s[:, None, :])
            for i in range(n):
                for j in range(i + 1):
                    partials[i][j].append(math.fsum(terms[:, i, j].tolist()))


def _sparse_partials(
    updates: Sequence[bytes],
    shapes: Shapes,
    compression: CompressionSpec,
    partials: list[list[list[float]]],
) -> None:
    streams = [iter_decode_update(data, compression, shapes) for data in updates]
    for tensors in zip(*streams, strict=True):
        flat = [t.numpy().astype(np.float64).ravel() for _, t in tensors]
        for i in range(len(flat)):
            for j in range(i + 1):
                nz = (flat[i] != 0) & (flat[j] != 0)
                partials[i][j].append(math.fsum((flat[i][nz] * flat[j][nz]).tolist()))
