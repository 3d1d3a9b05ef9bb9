"""The scoring rule: pairwise per-sample wins with an epsilon advantage, softmax weights.

For every pair of eligible models and every evaluated page, the *older* model (the
earlier commitment) has its loss multiplied by ``1 - epsilon`` and the lower loss
wins the page; a tie goes to the older model. A model's win rate is the share of
all its page comparisons it won. Weights are a softmax over win rates at the spec's
temperature (a low temperature is close to winner-takes-all), turned into integer
units for the ledger. A newcomer therefore displaces the incumbent only by being
better by more than epsilon on most pages, and an exact copy (which loses every tie)
never wins. Everything is a pure function of the scores and the commit order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hypertrain.competition.spec import EpsilonSchedule


@dataclass(frozen=True, slots=True)
class Entry:
    """One eligible model in a cycle: who, when committed (order), and its page losses."""

    hotkey: str
    model_sha: str
    commit_round: int
    commit_id: str  # breaks ties between commitments in the same beacon round
    losses: tuple[float, ...]

    @property
    def order(self) -> tuple[int, str]:
        return (self.commit_round, self.commit_id)


@dataclass(frozen=True, slots=True)
class Standing:
    hotkey: str
    model_sha: str
    wins: int
    comparisons: int
    win_rate: float
    weight: float
    units: int


def _loss(value: float) -> float:
    return math.inf if math.isnan(value) else value


def pair_wins(older: Entry, newer: Entry, epsilon: float) -> tuple[int, int]:
    """(pages the older model wins, pages the newer one wins)."""
    if len(older.losses) != len(newer.losses):
        raise ValueError("both models must be scored on the same pages")
    old_wins = sum(
        1
        for a, b in zip(older.losses, newer.losses, strict=True)
        if _loss(a) * (1.0 - epsilon) <= _loss(b)
    )
    return old_wins, len(older.losses) - old_wins


def win_rates(
    entries: Sequence[Entry], schedule: EpsilonSchedule, cycle_round: int
) -> dict[str, tuple[int, int]]:
    """model_sha -> (wins, comparisons) over every pair of entries."""
    ordered = sorted(entries, key=lambda e: e.order)
    tally = {e.model_sha: [0, 0] for e in ordered}
    for i, older in enumerate(ordered):
        epsilon = schedule.at(cycle_round - older.commit_round)
        for newer in ordered[i + 1 :]:
            a, b = pair_wins(older, newer, epsilon)
            tally[older.model_sha][0] += a
            tally[newer.model_sha][0] += b
            for sha in (older.model_sha, newer.model_sha):
                tally[sha][1] += a + b
    return {sha: (w, n) for sha, (w, n) in tally.items()}


def softmax(values: Sequence[float], temperature: float) -> list[float]:
    top = max(values)
    exps = [math.exp((v - top) / temperature) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def standings(
    entries: Sequence[Entry],
    schedule: EpsilonSchedule,
    cycle_round: int,
    *,
    temperature: float,
    units: int,
) -> list[Standing]:
    """Win rate, softmax weight and integer units of every entry, best first."""
    if not entries:
        return []
    tally = win_rates(entries, schedule, cycle_round)
    rates = [
        (tally[e.model_sha][0] / tally[e.model_sha][1]) if tally[e.model_sha][1] else 1.0
        for e in entries
    ]
    weights = softmax(rates, temperature)
    out = [
        Standing(
            e.hotkey, e.model_sha, tally[e.model_sha][0], tally[e.model_sha][1], r, w,
            int(w * units + 0.5),
        )
        for e, r, w in zip(entries, rates, weights, strict=True)
    ]  # fmt: skip
    return sorted(out, key=lambda s: (-s.win_rate, s.hotkey))
