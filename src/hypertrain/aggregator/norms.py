"""Pass 1 of a merge: validate an int8 update and compute its L2 norm exactly.

The norm decides clipping and screening, so it must be the same number on every
machine. It is computed from the codes, not from float tensors: per block,
``sum(q^2)`` is an exact integer, ``scale^2`` is exact in float64, their product is
one IEEE rounding, and the blocks are summed with ``math.fsum`` (correctly rounded,
independent of order). No thread count or BLAS choice can change the result.

Every failure is an :class:`UpdateFormatError` whose ``reason`` is a screen code:
``wrong_size`` (length disagrees with the header or the commit), ``wrong_shape``
(tensor names or shapes are not the model's), ``non_finite`` (a NaN/Inf scale),
``malformed`` (anything else the codec refuses, an update in another codec than the
run's, or int8 blocks of another size than the run's ``compression.block_size``, which
the exact inner products of :mod:`hypertrain.aggregator.gram` rely on). Sparse updates
(``trainer.sparse_codec``) get the same exactness from their codes: per chunk an exact
integer sum times ``scale^2 / 4``, summed with ``math.fsum``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from hypertrain.aggregator.errors import UpdateFormatError
from hypertrain.protocol.manifest import CompressionSpec
from hypertrain.trainer.codec import check_format, iter_blocks, parse_header
from hypertrain.trainer.errors import CodecError
from hypertrain.trainer.sparse_codec import SparseParams, is_sparse, sparse_norm_terms
from hypertrain.trainer.update import sparse_params

Shapes = Sequence[tuple[str, tuple[int, ...]]]


def classify(exc: CodecError) -> UpdateFormatError:
    """Map a codec refusal to a screen code."""
    text = str(exc)
    if "header implies" in text or "truncated" in text:
        reason = "wrong_size"
    elif "names and shapes" in text:
        reason = "wrong_shape"
    elif "NaN" in text or "Inf" in text:
        reason = "non_finite"
    else:
        reason = "malformed"
    return UpdateFormatError(reason, text)


def update_norm(data: bytes, expected: Shapes, compression: CompressionSpec | None = None) -> float:
    """The exact L2 norm of the decoded update, after validating it for ``expected`` and
    the run's codec (int8 unless ``compression`` says sparse)."""
    params = None if compression is None else sparse_params(compression)
    if (params is not None) != is_sparse(data):
        raise UpdateFormatError("malformed", "update is not encoded with the run's codec")
    if params is not None:
        return _sparse_norm(data, expected, params)
    try:
        block_size = parse_header(data)[0]
        if compression is not None and block_size != compression.block_size:
            raise UpdateFormatError(
                "malformed", f"block size {block_size}, the run's is {compression.block_size}"
            )
        if compression is not None:
            check_format(data, compression.bits, compression.entropy)
        terms = [_block_terms(scales, codes, block_size)
                 for _, scales, codes in iter_blocks(data, expected)]  # fmt: skip
    except CodecError as exc:
        raise classify(exc) from None
    return math.sqrt(math.fsum(np.concatenate(terms).tolist())) if terms else 0.0


def _block_terms(scales: np.ndarray, codes: np.ndarray, block_size: int) -> np.ndarray:
    """Per block, ``scale ** 2 * sum(code ** 2)`` (exact: integer sums, float64 products)."""
    s = scales.astype(np.float64)
    pad = -codes.size % block_size
    squares = np.pad(codes.astype(np.int64) ** 2, (0, pad)).reshape(s.size, block_size)
    terms: np.ndarray = s * s * squares.sum(axis=1).astype(np.float64)
    return terms


def _sparse_norm(data: bytes, expected: Shapes, params: SparseParams) -> float:
    """The sparse codec's exact norm (per-chunk integer sums, ``math.fsum`` over chunks)."""
    try:
        terms = sparse_norm_terms(data, expected, params)
    except CodecError as exc:
        raise classify(exc) from None
    return math.sqrt(math.fsum(terms)) if terms else 0.0
