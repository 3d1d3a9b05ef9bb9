"""The scoring rule: epsilon advantage of the older model, copies, decay, softmax."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypertrain.competition.scoring import (
    Entry,
    pair_wins,
    reward_weights,
    softmax,
    standings,
)
from hypertrain.competition.spec import EpsilonSchedule

CONST = EpsilonSchedule(kind="constant", start=0.005, end=0.005)


def entry(hotkey: str, losses: list[float], commit_round: int) -> Entry:
    return Entry(hotkey, hotkey * 8, commit_round, ord(hotkey[0]), tuple(losses))


def test_newcomer_better_by_less_than_epsilon_loses_every_page() -> None:
    old = entry("a", [2.0] * 10, 1)
    new = entry("b", [2.0 * 0.997] * 10, 5)  # 0.3 % better, epsilon is 0.5 %
    assert pair_wins(old, new, 0.005) == (10, 0)


def test_newcomer_better_by_more_than_epsilon_wins() -> None:
    old = entry("a", [2.0] * 10, 1)
    new = entry("b", [2.0 * 0.99] * 10, 5)
    assert pair_wins(old, new, 0.005) == (0, 10)


def test_exact_copy_never_wins_a_page() -> None:
    old = entry("a", [1.5, 2.5, 3.0], 1)
    copy = entry("b", [1.5, 2.5, 3.0], 9)
    assert pair_wins(old, copy, 0.0) == (3, 0)
    table = standings([copy, old], CONST, 20, temperature=0.01, units=1000)
    assert table[0].hotkey == "a" and table[0].units > 990


def test_nan_loss_loses() -> None:
    old = entry("a", [float("nan")] * 4, 1)
    new = entry("b", [9.0] * 4, 5)
    assert pair_wins(old, new, 0.005) == (0, 4)


def test_clearly_better_model_takes_the_weight() -> None:
    entries = [
        entry("a", [3.0] * 8, 1),
        entry("b", [3.0 * 0.998] * 8, 2),  # within epsilon of a
        entry("c", [2.5] * 8, 3),  # clearly better
    ]
    table = standings(entries, CONST, 10, temperature=0.01, units=1_000_000)
    assert [s.hotkey for s in table] == ["c", "a", "b"]
    assert table[0].win_rate == 1.0
    assert table[0].units > 999_000
    assert sum(s.units for s in table) <= 1_000_001


def test_single_entry_takes_everything() -> None:
    table = standings([entry("a", [1.0], 1)], CONST, 5, temperature=0.01, units=100)
    assert table[0].units == 100 and table[0].win_rate == 1.0


def test_linear_schedule_follows_the_older_models_age() -> None:
    sched = EpsilonSchedule(kind="linear", start=0.02, end=0.0, decay_rounds=100)
    assert sched.at(0) == pytest.approx(0.02)
    assert sched.at(50) == pytest.approx(0.01)
    assert sched.at(100) == pytest.approx(0.0)
    assert sched.at(1000) == pytest.approx(0.0)
    old = entry("a", [2.0] * 4, 0)
    new = entry("b", [2.0 * 0.985] * 4, 10)  # 1.5 % better
    young = standings([old, new], sched, 10, temperature=0.01, units=100)
    aged = standings([old, new], sched, 80, temperature=0.01, units=100)
    assert young[0].hotkey == "a"  # epsilon 1.8 % at age 10
    assert aged[0].hotkey == "b"  # epsilon 0.4 % at age 80


def test_standings_do_not_depend_on_input_order() -> None:
    entries = [entry(h, [float(i + 1)] * 3, i) for i, h in enumerate("abcd")]
    forward = standings(entries, CONST, 9, temperature=0.05, units=10_000)
    backward = standings(entries[::-1], CONST, 9, temperature=0.05, units=10_000)
    assert forward == backward


@given(st.lists(st.floats(-5, 5), min_size=1, max_size=20), st.floats(0.001, 5))
def test_softmax_is_a_distribution(values: list[float], temperature: float) -> None:
    out = softmax(values, temperature)
    assert sum(out) == pytest.approx(1.0)
    assert all(0 <= v <= 1 for v in out)
    assert out[values.index(max(values))] == max(out)


def test_win_rates_051_against_049_still_give_the_best_95_percent() -> None:
    assert reward_weights([0.51, 0.49], 0.95, 0.01)[0] == pytest.approx(0.95)
    assert softmax([0.51, 0.49], 0.01)[0] < 0.9  # what a plain softmax would pay


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30), st.floats(0.001, 5))
def test_the_best_entry_always_receives_at_least_95_percent(
    rates: list[float], temperature: float
) -> None:
    weights = reward_weights(rates, 0.95, temperature)
    best = max(range(len(rates)), key=lambda i: (rates[i], -i))
    assert weights[best] >= 0.95 - 1e-12
    assert sum(weights) == pytest.approx(1.0)
    assert all(w >= 0 for w in weights)


@given(st.lists(st.lists(st.floats(0.5, 9), min_size=6, max_size=6), min_size=1, max_size=8))
def test_units_sum_exactly_and_the_leader_gets_95_percent(losses: list[list[float]]) -> None:
    entries = [entry(chr(97 + i), row, i) for i, row in enumerate(losses)]
    table = standings(entries, CONST, 40, temperature=0.01, units=1_000_000)
    assert sum(s.units for s in table) == 1_000_000
    assert table[0].counted and table[0].units >= 950_000


def test_junk_entries_cannot_dilute_the_leader() -> None:
    leader = entry("L", [2.0] * 10, 5)
    worse = entry("W", [2.5] * 10, 1)  # the incumbent the leader displaced
    junk = [entry(f"j{i:03d}", [2.6 + i * 1e-4] * 10, 6 + i) for i in range(100)]
    early_junk = [entry(f"e{i:03d}", [2.7] * 10, 0) for i in range(5)]
    table = standings([worse, leader, *junk, *early_junk], CONST, 200,
                      temperature=0.01, units=1_000_000)  # fmt: skip
    by = {s.hotkey: s for s in table}
    assert table[0].hotkey == "L" and by["L"].units >= 950_000 and by["L"].win_rate == 1.0
    assert not any(by[e.hotkey].counted for e in junk)
    assert sum(by[e.hotkey].units for e in junk) == 0
    assert by["W"].units < 50_000


def test_entries_not_below_the_baseline_are_not_counted() -> None:
    entries = [entry("a", [3.0] * 4, 1), entry("b", [2.0] * 4, 2)]
    table = standings(entries, CONST, 9, temperature=0.01, units=100, baseline_loss=2.5)
    by = {s.hotkey: s for s in table}
    assert by["b"].units == 100 and not by["a"].counted
    none = standings(entries, CONST, 9, temperature=0.01, units=100, baseline_loss=1.0)
    assert all(not s.counted and s.units == 0 for s in none)


def _same_round(losses: list[list[float]], seqs: list[int]) -> list[Entry]:
    return [Entry(f"h{i}", f"{i:02x}" * 32, 7, q, tuple(v)) for i, (v, q) in
            enumerate(zip(losses, seqs, strict=True))]  # fmt: skip


@given(
    st.lists(st.lists(st.sampled_from([1.0, 1.995, 2.0, 2.01, 3.0]), min_size=4, max_size=4),
             min_size=2, max_size=5),
    st.randoms(use_true_random=False),
)  # fmt: skip
def test_same_round_commitments_hold_no_advantage_over_each_other(
    losses: list[list[float]], rng: object
) -> None:
    """Whatever order a round's commitments come in, each one's wins, win rate and
    whether it counts are the same: a sybil that commits many variants and reveals the
    one ordered first gains nothing from it."""
    seqs = list(range(len(losses)))
    shuffled = seqs[:]
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    earlier = Entry("old", "ff" * 32, 3, 0, (2.5,) * 4)

    def table(order: list[int]) -> dict[str, tuple[int, int, bool]]:
        out = standings([earlier, *_same_round(losses, order)], CONST, 20, temperature=0.01,
                        units=1000)  # fmt: skip
        return {s.hotkey: (s.wins, s.comparisons, s.counted) for s in out}

    assert table(seqs) == table(shuffled)


def test_a_same_round_tie_is_won_by_neither() -> None:
    a, b = _same_round([[2.0, 1.0, 3.0, 2.0], [2.0, 2.0, 2.0, 2.0]], [0, 1])
    assert pair_wins(a, b, 0.5) == (1, 1)  # no epsilon, the two equal pages to nobody
    assert pair_wins(b, a, 0.5) == (1, 1)
