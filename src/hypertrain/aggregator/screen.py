"""Robust screens and clipping: pure functions of norms that no update can capture.

Every update is judged against a *reference norm* ``r``, anchored on audit-proven norms,
which what the round's unaudited updates say about themselves can lower within a bound
but never raise. The trusted pool:

1. the **proven history**: the norms of updates that an audit proved (a ``match``
   verdict that re-encoded the update from the replayed final state) in earlier rounds,
   the latest :data:`HISTORY_NORMS` of them (``Tape.history_norms``,
   :func:`proven_history`);
2. the **proven** norms of this round;
3. the manifest's ``outer.reference_norm``, when the operator set one.

The proven reference ``p`` is the median of that pool. An empty pool merges nothing
(``no_reference``): the round's own norms never set the reference, so a run needs proven
updates before it merges anything, which probation gives it (every new island is
audited), and the manifest refuses ``audit.probation_rounds = 0`` without another
trusted source (``audit.rate = 1`` or ``outer.reference_norm``).

The proven pool goes stale late in a run: most of it comes from probation rounds, when
the learning rate is at its peak, and honest norms fall with the schedule (about tenfold
at ``min_lr_ratio = 0.1``) while few audits refresh it. So the round's own norms may
*lower* the reference, never raise it, and by at most ``sqrt(reject_norm_factor)``
(:func:`followed_reference`): ``r = min(p, max(median of the round's norms, p / sqrt(f)))``.
Under an honest majority ``r`` follows the round's honest norms down; no number of
unaudited updates can lift it above ``p``, and sybils holding the round's median can
lower it at most ``sqrt(f)``-fold, so an honest update at ``p`` is still inside the band
(below ``sqrt(f) * p``) and clipped to no less than ``clip_to_median_factor / sqrt(f)``
of ``p``; nothing of a round carries over to the next (the history holds proven norms
only). Then:

* an update whose norm lies outside ``[r / reject_norm_factor, r * reject_norm_factor]``
  is rejected (``norm_outlier``); an all-zero update (``zero_norm``) carries no
  training and is rejected too;
* every remaining update is scaled by ``min(1, clip_to_median_factor * r / norm)``,
  so no single island can move the model much further than a typical one.

With an even count the median is the mean of the two middle norms. Everything is
float64 and order-free.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from hypertrain.aggregator.tape import Included
from hypertrain.protocol.manifest import OuterOptimSpec


@dataclass(frozen=True, slots=True)
class ScreenResult:
    median: float
    clip_threshold: float
    clip: dict[str, float]  # hotkey -> clip factor, for accepted updates
    rejected: dict[str, tuple[str, str]]  # hotkey -> (reason, detail)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return 0.0
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


HISTORY_NORMS = 16  # proven norms of earlier rounds that join the reference pool


class ProvenRecord(Protocol):
    """What a merged round tells the next ones: a :class:`Tape`, or the pure merge's
    ``combine.Selection``."""

    @property
    def included(self) -> Sequence[Included]: ...

    @property
    def proven(self) -> Sequence[str]: ...


def proven_history(tapes: Iterable[ProvenRecord]) -> list[float]:
    """The latest :data:`HISTORY_NORMS` proven norms of ``tapes`` (given newest first)."""
    out: list[float] = []
    for tape in tapes:
        proven = set(tape.proven)
        out += [i.norm for i in sorted(tape.included, key=lambda i: i.hotkey) if i.hotkey in proven]
        if len(out) >= HISTORY_NORMS:
            break
    return out[:HISTORY_NORMS]


def reference_norm(
    norms: Mapping[str, float],
    history: Sequence[float],
    proven: Collection[str],
    anchor: float | None = None,
) -> float | None:
    """The median of the trusted pool, or None when it is empty."""
    pool = [float(n) for n in history if n > 0]
    pool += [norms[h] for h in sorted(proven) if h in norms and norms[h] > 0]
    if anchor is not None:
        pool.append(anchor)
    return median(pool) if pool else None


def followed_reference(proven_ref: float, norms: Mapping[str, float], factor: float) -> float:
    """The proven reference lowered toward the median of the round's non-zero ``norms``,
    at most ``sqrt(factor)``-fold and never raised (see the module docstring)."""
    own = median([norms[h] for h in sorted(norms) if norms[h] > 0])
    return min(proven_ref, max(own, proven_ref / math.sqrt(factor)))


def screen(
    norms: Mapping[str, float],
    outer: OuterOptimSpec,
    history: Sequence[float] = (),
    proven: Collection[str] = (),
) -> ScreenResult:
    """Reject outliers and compute each accepted update's clip factor."""
    ref = reference_norm(norms, history, proven, outer.reference_norm)
    if ref is not None:
        ref = followed_reference(ref, norms, outer.reject_norm_factor)
    m = ref or 0.0
    threshold = outer.clip_to_median_factor * m
    clip: dict[str, float] = {}
    rejected: dict[str, tuple[str, str]] = {}
    for hotkey in sorted(norms):
        norm = norms[hotkey]
        if norm == 0.0:
            rejected[hotkey] = ("zero_norm", "the update is all zeros")
        elif ref is None:
            rejected[hotkey] = (
                "no_reference",
                "no audit-proven norm yet (earlier rounds, this round or the manifest)",
            )
        elif norm > m * outer.reject_norm_factor or norm * outer.reject_norm_factor < m:
            detail = f"norm {norm:.6g} vs reference {m:.6g} (factor {outer.reject_norm_factor})"
            rejected[hotkey] = ("norm_outlier", detail)
        else:
            clip[hotkey] = min(1.0, threshold / norm)
    return ScreenResult(m, threshold, clip, rejected)


def token_weights(tokens: Mapping[str, int]) -> dict[str, float]:
    """Each hotkey's share of the verified tokens (float64, exact integer total)."""
    total = sum(tokens.values())
    if total <= 0:
        return dict.fromkeys(tokens, 0.0)
    return {hotkey: tokens[hotkey] / total for hotkey in sorted(tokens)}
