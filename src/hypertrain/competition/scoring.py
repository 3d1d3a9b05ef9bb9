"""The scoring rule: pairwise per-sample wins with an epsilon advantage, and the reward.

For every pair of eligible models and every evaluated page, the *older* model (the
one committed in an earlier beacon round) has its loss multiplied by ``1 - epsilon``
and the lower loss wins the page; a tie goes to the older model. Commitments of the
*same* beacon round hold no advantage over each other: no epsilon, and a tie wins for
neither, so a miner that commits several variants in one round and reveals only one
of them cannot choose an order that favours it (the order within a round, the
service's acceptance order ``seq``, decides only an exact tie of win rates). Before
win rates, entries that do not count are dropped (:func:`contenders`: not below the
baseline, or beating no model of an earlier round), and a hotkey is paid only for its
newest counted entry (:func:`earners`; its older ones are references that still judge
the models committed after them). A model's win rate is the share of all its page
comparisons it won, against the other paid entries.
The best model (highest win rate, the older on a tie) receives the larger of its
softmax weight and ``winner_share`` (at least 0.95); the others share the rest in
proportion to their softmax weights; weights become integer units for the ledger,
the best taking the rounding. A newcomer therefore displaces the incumbent only by
being better by more than epsilon on most pages, and an exact copy (which loses
every tie) never wins. Everything is a pure function of the scores and the order.

This is not SN9's current rule, which compares one mean loss per model; the six
differences and their reasons are in docs/competition.md, "Hypertrain and SN9".
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
    seq: int  # the order the service accepted the commitment in, fixed at commit
    losses: tuple[float, ...]

    @property
    def order(self) -> tuple[int, int]:
        return (self.commit_round, self.seq)


@dataclass(frozen=True, slots=True)
class Standing:
    hotkey: str
    model_sha: str
    wins: int
    comparisons: int
    win_rate: float
    weight: float
    units: int
    counted: bool = True  # False: dropped before win rates (see contenders)
    # a counted entry that is not its hotkey's newest counted one stands in the order as a
    # reference with no wins, comparisons or weight (see earners)


def _loss(value: float) -> float:
    return math.inf if math.isnan(value) else value


def pair_wins(older: Entry, newer: Entry, epsilon: float) -> tuple[int, int]:
    """(pages the older model wins, pages the newer one wins).

    Of two commitments of the same beacon round neither is older: no epsilon, and a
    page both score alike is won by neither (the pair then compares fewer pages).
    """
    if len(older.losses) != len(newer.losses):
        raise ValueError("both models must be scored on the same pages")
    pairs = [(_loss(a), _loss(b)) for a, b in zip(older.losses, newer.losses, strict=True)]
    if older.commit_round == newer.commit_round:
        return sum(1 for a, b in pairs if a < b), sum(1 for a, b in pairs if b < a)
    old_wins = sum(1 for a, b in pairs if a * (1.0 - epsilon) <= b)
    return old_wins, len(pairs) - old_wins


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


def _mean(losses: tuple[float, ...]) -> float:
    return sum(_loss(v) for v in losses) / len(losses) if losses else math.inf


def beats(newer: Entry, older: Entry, schedule: EpsilonSchedule, cycle_round: int) -> bool:
    """``newer`` wins more than half the pages against ``older`` (epsilon at its age)."""
    old_wins, new_wins = pair_wins(older, newer, schedule.at(cycle_round - older.commit_round))
    return new_wins > old_wins


def contenders(
    entries: Sequence[Entry],
    schedule: EpsilonSchedule,
    cycle_round: int,
    baseline_loss: float | None = None,
    references: frozenset[str] = frozenset(),
) -> list[Entry]:
    """The entries that count, oldest first: the filter before win rates (not SN9's, which
    keeps a model whose mean loss beats every earlier model's at fully decayed epsilon;
    docs/competition.md, "Hypertrain and SN9").

    An entry counts when its mean page loss is below the published baseline (when
    the spec sets one) and it beats, head to head with the epsilon advantage, every
    entry counted in the newest earlier beacon round that has one (which beat the
    rounds before in turn) and every reference (model hashes in ``references``, the
    task's) committed after that round and before the entry's, whether or not that
    reference counts this cycle: a reference stands for a model that once counted, and
    one cycle's pages that favour the model before it must not let what was committed
    behind it pass without beating it. Entries of one round are judged against the same
    earlier ones, never against each other, so their order within the round changes
    nothing. An entry that improves on no earlier model is dropped, so junk cannot
    dilute the win rates of the models that matter.
    """
    kept: list[Entry] = []
    latest: list[Entry] = []  # the counted entries of the newest round that has some
    ordered = sorted(entries, key=lambda e: e.order)
    bars = [e for e in ordered if e.model_sha in references]
    for commit_round in sorted({e.commit_round for e in ordered}):
        since = latest[0].commit_round if latest else None
        held = latest + [r for r in bars if (since is None or r.commit_round > since)
                         and r.commit_round < commit_round]  # fmt: skip
        passed = [
            e
            for e in ordered
            if e.commit_round == commit_round
            and (baseline_loss is None or _mean(e.losses) < baseline_loss)
            and all(beats(e, old, schedule, cycle_round) for old in held)
        ]
        kept += passed
        latest = passed or latest
    return kept


def reward_weights(rates: Sequence[float], winner_share: float, temperature: float) -> list[float]:
    """Softmax of the win rates, with the best entry lifted to at least ``winner_share``.

    ``best`` is the first entry of the highest rate (entries are oldest first, so the
    older wins a tie). With ``s = softmax(rates / temperature)`` the best receives
    ``w = max(winner_share, s[best])`` and every other entry ``s[i] (1 - w) /
    (1 - s[best])``: the order of the others is kept and the weights sum to 1.
    """
    soft = softmax(rates, temperature)
    best = max(range(len(rates)), key=lambda i: (rates[i], -i))
    top = max(winner_share, soft[best])
    rest = 1.0 - soft[best]
    scale = (1.0 - top) / rest if rest > 0 else 0.0
    return [top if i == best else w * scale for i, w in enumerate(soft)]


def _units(weights: Sequence[float], best: int, units: int) -> list[int]:
    out = [int(w * units) for w in weights]
    out[best] = units - sum(u for i, u in enumerate(out) if i != best)
    return out


def standings(
    entries: Sequence[Entry],
    schedule: EpsilonSchedule,
    cycle_round: int,
    *,
    temperature: float,
    units: int,
    winner_share: float = 0.95,
    baseline_loss: float | None = None,
    references: frozenset[str] = frozenset(),
) -> list[Standing]:
    """Win rate, weight and integer units of every entry, best first.

    Entries that do not count (see :func:`contenders`, which ``references`` enter as
    bars) are listed with no weight, and so are counted entries that are not their
    hotkey's newest counted one (see :func:`earners`).
    """
    if not entries:
        return []
    counted = contenders(entries, schedule, cycle_round, baseline_loss, references)
    paid = earners(counted)
    out: list[Standing] = []
    if paid:
        tally = win_rates(paid, schedule, cycle_round)
        rates = [(tally[e.model_sha][0] / n) if (n := tally[e.model_sha][1]) else 1.0
                 for e in paid]  # fmt: skip
        weights = reward_weights(rates, winner_share, temperature)
        best = max(range(len(rates)), key=lambda i: (rates[i], -i))
        shares = _units(weights, best, units)
        out = [
            Standing(e.hotkey, e.model_sha, *tally[e.model_sha], r, w, u, True)
            for e, r, w, u in zip(paid, rates, weights, shares, strict=True)
        ]
    ids = {e.model_sha for e in paid}
    chain = {e.model_sha for e in counted}
    out += [
        Standing(e.hotkey, e.model_sha, 0, 0, 0.0, 0.0, 0, e.model_sha in chain)
        for e in sorted(entries, key=lambda e: e.order)
        if e.model_sha not in ids
    ]
    return sorted(out, key=standing_order)


def standing_order(s: Standing) -> tuple[bool, int, float, str, str]:
    """The order of a cycle's table: counted first, then by units, win rate, hotkey, model."""
    return (not s.counted, -s.units, -s.win_rate, s.hotkey, s.model_sha)


def earners(counted: Sequence[Entry]) -> list[Entry]:
    """Each hotkey's newest counted entry, oldest first: the entries that share the reward.

    A hotkey's older models stay in the order as references (they judge the models
    committed after them) but a hotkey is paid once, for its newest model that counts.
    """
    newest = {e.hotkey: e for e in sorted(counted, key=lambda e: e.order)}
    return sorted(newest.values(), key=lambda e: e.order)
