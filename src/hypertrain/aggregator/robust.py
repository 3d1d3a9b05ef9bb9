"""Robust decisions on a round's Gram matrix: copies, updates against the rest, the median.

Everything here is a function of the inner products ``G[i][j] = <u_i, u_j>``
(:mod:`hypertrain.aggregator.gram`) and of the token weights, computed in Python floats
(IEEE double, one rounding per operation, no fused multiply-add, sums with
``math.fsum``) in a fixed order, so every machine takes the same decisions and
``verify-tape`` reproduces them bit for bit.

* **Copies** (:func:`find_copies`): in commit order, an update is a copy when it is
  explained by the updates kept before it: the residual of its least-squares
  projection onto their span is below :data:`COPY_RESIDUAL` of its own norm. A rescaled
  or reversed copy has residual 0, an honest update plus noise at cosine 0.98 at most
  0.2, the mean of two updates about 0 (its int8 rounding), while an honest update
  trained on other samples keeps most of its norm outside the span of the others.
  The projection is an incremental Cholesky factorisation of the kept updates' Gram
  matrix; every kept update adds at least :data:`COPY_RESIDUAL` of its norm as a new
  direction, so the factor stays well conditioned.
* **Geometric median** (:func:`geometric_median`): the point ``z`` minimising
  ``sum_i w_i |z - v_i|``, found by Weiszfeld's iteration. Every iterate is a convex
  combination ``z = sum_i a_i v_i``, so ``|z - v_j|^2 = a.G.a - 2 (G a)_j + G_jj`` needs
  only the Gram matrix and the merge applies the final coefficients ``a`` in one
  streaming weighted sum. With one or two updates it is their token-weighted mean. A
  minority of any size below half the token weight cannot move it arbitrarily far
  (breakdown point 1/2).
* **Against the aggregate** (:func:`loo_cosines`): each update's cosine with the
  geometric median of the *other* updates; below :data:`AGAINST_COSINE` it points
  against (or across) what the round agrees on. The others' median is what a
  token-weighted half can move (leave one honest update out and a half of sybils is a
  majority of the rest), so where audit-proven updates exist (this round's or the
  last rounds') each update is also measured against their direction
  (:func:`reference_cosines`), which no unaudited update moves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from hypertrain.aggregator.gram import Gram

COPY_RESIDUAL: Final = 0.3  # relative residual below which an update is explained by others
AGAINST_COSINE: Final = 0.05  # cosine with the leave-one-out median below which it is out
MEDIAN_ITERATIONS: Final = 200  # Weiszfeld steps at most
MEDIAN_TOLERANCE: Final = 1e-12  # stop once no coefficient moves by more than this
_FLOOR: Final = 1e-9  # distances below this fraction of the largest norm count as this


@dataclass(frozen=True, slots=True)
class Copy:
    index: int  # the copy, an index into the Gram matrix
    residual: float  # |residual| / |u| after projection onto the earlier kept updates
    basis: tuple[int, ...]  # the kept updates it was projected on


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def find_copies(gram: Gram, order: Sequence[int]) -> list[Copy]:
    """The updates (visited in ``order``) explained by those kept before them."""
    kept: list[int] = []
    rows: list[list[float]] = []  # Cholesky factor of the kept updates' Gram matrix
    copies: list[Copy] = []
    for i in order:
        y: list[float] = []
        for r, k in enumerate(kept):  # solve L y = G[kept][i] by forward substitution
            y.append((gram[k][i] - _dot(rows[r][:r], y)) / rows[r][r])
        norm2 = gram[i][i]
        res2 = max(0.0, norm2 - _dot(y, y))
        rel = math.sqrt(res2 / norm2) if norm2 > 0 else 0.0
        if rel < COPY_RESIDUAL:
            copies.append(Copy(i, rel, tuple(kept)))
            continue
        rows.append([*y, math.sqrt(res2)])
        kept.append(i)
    return copies


def _sub(gram: Gram, idx: Sequence[int]) -> Gram:
    return [[gram[i][j] for j in idx] for i in idx]


def _distances(gram: Gram, a: Sequence[float]) -> list[float]:
    ga = [_dot(row, a) for row in gram]
    aga = _dot(a, ga)
    return [math.sqrt(max(0.0, aga - 2.0 * ga[j] + gram[j][j])) for j in range(len(a))]


def geometric_median(gram: Gram, weights: Sequence[float]) -> list[float]:
    """Coefficients ``a`` (summing to 1) of the weighted geometric median ``sum a_i v_i``.

    With one or two updates no rule can tell which is wrong, and the weighted median of
    two points is the heavier one alone: the token-weighted mean is returned instead.
    """
    total = math.fsum(weights)
    a = [w / total for w in weights]
    scale = math.sqrt(max((gram[i][i] for i in range(len(a))), default=0.0))
    if len(a) <= 2 or scale == 0.0:
        return a
    floor = _FLOOR * scale
    for _ in range(MEDIAN_ITERATIONS):
        d = _distances(gram, a)
        beta = [w / max(dj, floor) for w, dj in zip(weights, d, strict=True)]
        s = math.fsum(beta)
        new = [b / s for b in beta]
        moved = max(abs(x - y) for x, y in zip(new, a, strict=True))
        a = new
        if moved <= MEDIAN_TOLERANCE:
            break
    return a


def loo_cosines(gram: Gram, weights: Sequence[float]) -> list[float]:
    """Each update's cosine with the geometric median of all the others (1.0 if alone)."""
    n = len(weights)
    out: list[float] = []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        if not others:
            out.append(1.0)
            continue
        a = geometric_median(_sub(gram, others), [weights[j] for j in others])
        dot = _dot(a, [gram[i][j] for j in others])
        zz = _dot(a, [_dot(a, [gram[j][k] for k in others]) for j in others])
        denom = math.sqrt(gram[i][i]) * math.sqrt(max(zz, 0.0))
        out.append(dot / denom if denom > 0 else 0.0)
    return out


def reference_cosines(
    gram: Gram, reference: Sequence[int], indices: Sequence[int]
) -> list[float] | None:
    """Each of ``indices``' cosine with the trusted direction ``t = sum_k u_k / |u_k|``
    over the ``reference`` updates (audit-proven ones); None when there is none."""
    ref = [k for k in reference if gram[k][k] > 0]
    if not ref:
        return None
    c = [1.0 / math.sqrt(gram[k][k]) for k in ref]
    tt = math.fsum(c[a] * c[b] * gram[i][j] for a, i in enumerate(ref) for b, j in enumerate(ref))
    out: list[float] = []
    for i in indices:
        dot = math.fsum(c[a] * gram[i][k] for a, k in enumerate(ref))
        denom = math.sqrt(gram[i][i]) * math.sqrt(max(tt, 0.0))
        out.append(dot / denom if denom > 0 else 0.0)
    return out
