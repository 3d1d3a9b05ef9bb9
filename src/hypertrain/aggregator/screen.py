"""Robust screens and clipping: pure functions of the round's update norms.

Given the norms of every update that decoded, the round's median norm ``m`` fixes
two thresholds from the manifest's outer section:

* an update whose norm lies outside ``[m / reject_norm_factor, m * reject_norm_factor]``
  is far from the round's distribution and is rejected (``norm_outlier``); an
  all-zero update (``zero_norm``) carries no training and is rejected too;
* every remaining update is scaled by ``min(1, clip_to_median_factor * m / norm)``,
  so no single island can move the model much further than a typical one.

The median is taken over all decoded updates (before rejection), so an outlier
cannot move the threshold that judges it by more than one rank. With an even count
it is the mean of the two middle norms. Everything is float64 and order-free.
"""

from __future__ import annotations

from collections.abc import Mapping
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


def screen(norms: Mapping[str, float], outer: OuterOptimSpec) -> ScreenResult:
    """Reject outliers and compute each accepted update's clip factor."""
    m = median(list(norms.values()))
    threshold = outer.clip_to_median_factor * m
    clip: dict[str, float] = {}
    rejected: dict[str, tuple[str, str]] = {}
    for hotkey in sorted(norms):
        norm = norms[hotkey]
        if norm == 0.0:
            rejected[hotkey] = ("zero_norm", "the update is all zeros")
        elif norm > m * outer.reject_norm_factor or norm * outer.reject_norm_factor < m:
            detail = f"norm {norm:.6g} vs round median {m:.6g} (factor {outer.reject_norm_factor})"
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
