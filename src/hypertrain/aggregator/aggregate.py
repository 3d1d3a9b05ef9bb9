"""The robust aggregate of a screened round: which updates count, and with what coefficient.

Input: the updates the norm screen accepted, with their clip factors and verified
tokens. Steps, all on the exact Gram matrix (:mod:`hypertrain.aggregator.gram`) of the
*unclipped* updates, decided by :mod:`hypertrain.aggregator.robust`:

1. **Copies**, in commit order: an update explained by those kept before it (relative
   residual below ``COPY_RESIDUAL`` after projection onto their span) is excluded as
   ``near_duplicate``; the earliest commit keeps its direction.
2. **Against the aggregate**: on the clipped updates ``v_i = clip_i * u_i``, the update
   whose cosine with the token-weighted geometric median of the others is lowest, if
   below ``AGAINST_COSINE``, is excluded as ``against_aggregate``; repeated on the rest
   until every cosine passes (:func:`against`).
3. **Coefficients**: the token-weighted geometric median of the remaining clipped
   updates, ``z = sum_i a_i v_i``; ``a_i`` is the tape's ``weight`` and the merge adds
   ``float32(a_i * clip_i) * u_i`` in hotkey order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hypertrain.aggregator.gram import Gram, Shapes, gram_matrix
from hypertrain.aggregator.robust import (
    AGAINST_COSINE,
    COPY_RESIDUAL,
    find_copies,
    geometric_median,
    loo_cosines,
)
from hypertrain.protocol.exclusions import ExclusionReason
from hypertrain.protocol.manifest import CompressionSpec

Rejected = dict[str, tuple[ExclusionReason, str]]


@dataclass(frozen=True, slots=True)
class Aggregate:
    weights: dict[str, float]  # hotkey -> geometric-median coefficient (sums to 1)
    rejected: Rejected = field(default_factory=dict)


def _scaled(gram: Gram, idx: Sequence[int], clip: Sequence[float]) -> Gram:
    return [[clip[i] * clip[j] * gram[i][j] for j in idx] for i in idx]


def copies(gram: Gram, hotkeys: Sequence[str], arrival: Sequence[str]) -> Rejected:
    """Updates explained by earlier commits' updates, visited in commit order."""
    index = {h: i for i, h in enumerate(hotkeys)}
    out: Rejected = {}
    for c in find_copies(gram, [index[h] for h in arrival if h in index]):
        basis = ", ".join(hotkeys[k] for k in c.basis)
        out[hotkeys[c.index]] = (
            "near_duplicate",
            f"explained by earlier updates ({basis}): residual {c.residual:.6f} of its norm"
            f" after projection (threshold {COPY_RESIDUAL})",
        )
    return out


def against(
    gram: Gram, live: Sequence[int], clip: Sequence[float], tokens: Sequence[int]
) -> list[tuple[int, float]]:
    """(index, cosine) of each update left out as pointing against the others.

    One at a time: the update with the lowest leave-one-out cosine goes if it is below
    the threshold, and the cosines are recomputed without it, so one reversed update
    cannot drag the others' leave-one-out medians down with it. Two updates below the
    threshold with each other cannot be told apart: both go.
    """
    left = list(live)
    out: list[tuple[int, float]] = []
    while len(left) >= 2:
        cosines = loo_cosines(_scaled(gram, left, clip), [tokens[i] for i in left])
        worst = min(range(len(left)), key=lambda k: (cosines[k], k))
        if cosines[worst] >= AGAINST_COSINE:
            break
        if len(left) == 2:
            return out + list(zip(left, cosines, strict=True))
        out.append((left.pop(worst), cosines[worst]))
    return out


def robust_aggregate(
    clip: Mapping[str, float],
    tokens: Mapping[str, int],
    arrival: Sequence[str],
    data: Callable[[str], bytes],
    shapes: Shapes,
    compression: CompressionSpec,
) -> Aggregate:
    """Copies and updates against the rest left out, the median's coefficients for the rest."""
    hotkeys = sorted(clip)
    if not hotkeys:
        return Aggregate({})
    gram = gram_matrix([data(h) for h in hotkeys], shapes, compression)
    rejected = copies(gram, hotkeys, arrival)
    live = [i for i, h in enumerate(hotkeys) if h not in rejected]
    factors = [clip[h] for h in hotkeys]
    for i, cos in against(gram, live, factors, [tokens[h] for h in hotkeys]):
        rejected[hotkeys[i]] = (
            "against_aggregate",
            f"cosine {cos:.6f} with the geometric median of the other updates"
            f" (threshold {AGAINST_COSINE})",
        )
    live = [i for i in live if hotkeys[i] not in rejected]
    a = geometric_median(_scaled(gram, live, factors), [tokens[hotkeys[i]] for i in live])
    return Aggregate({hotkeys[i]: w for i, w in zip(live, a, strict=True)}, rejected)
