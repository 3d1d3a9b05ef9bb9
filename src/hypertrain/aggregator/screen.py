"""Robust screens and clipping: pure functions of norms that no minority can capture.

Every update is judged against a *reference norm* ``r``, taken from trusted norms only:

1. the **history**: the effective (post-clip) norms of the updates merged in the
   trailing :data:`HISTORY_ROUNDS` rounds, plus
2. the **proven** norms of this round: updates whose audit returned ``match`` with the
   update itself checked (the auditor re-encoded it from the replayed final state).

``r`` is the median of that pool. Only when the pool is empty (a fresh network whose
first updates are not proven yet) does the round's own median count, and only with a
quorum of at least :data:`QUORUM` decoded updates, so that no single update, nor any
minority, can set it; below the quorum nothing is merged (``no_reference``). Then:

* an update whose norm lies outside ``[r / reject_norm_factor, r * reject_norm_factor]``
  is rejected (``norm_outlier``); an all-zero update (``zero_norm``) carries no
  training and is rejected too;
* every remaining update is scaled by ``min(1, clip_to_median_factor * r / norm)``,
  so no single island can move the model much further than a typical one.

An accepted norm enters the history already clipped (``norm * clip <= c * r``), so an
island that is accepted round after round can push the reference up by at most one
rank per round among a trailing window of many. With an even count the median is the
mean of the two middle norms. Everything is float64 and order-free.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

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


HISTORY_ROUNDS = 8  # trailing merged rounds whose accepted norms form the reference
QUORUM = 3  # decoded updates needed before a round may set its own reference


def reference_norm(
    norms: Mapping[str, float], history: Sequence[float], proven: Collection[str]
) -> tuple[float | None, str]:
    """(reference norm, where it came from); None when no rule can give one."""
    pool = [float(n) for n in history if n > 0]
    pool += [norms[h] for h in sorted(proven) if h in norms and norms[h] > 0]
    if pool:
        return median(pool), "trusted"
    live = [n for n in norms.values() if n > 0]
    if len(live) >= QUORUM:
        return median(live), "quorum"
    return None, "none"


def screen(
    norms: Mapping[str, float],
    outer: OuterOptimSpec,
    history: Sequence[float] = (),
    proven: Collection[str] = (),
) -> ScreenResult:
    """Reject outliers and compute each accepted update's clip factor."""
    ref, _source = reference_norm(norms, history, proven)
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
                f"no trusted norm yet and fewer than {QUORUM} decoded updates in the round",
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
