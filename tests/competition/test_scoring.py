"""The scoring rule: epsilon advantage of the older model, copies, decay, softmax."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypertrain.competition.scoring import Entry, pair_wins, softmax, standings
from hypertrain.competition.spec import EpsilonSchedule

CONST = EpsilonSchedule(kind="constant", start=0.005, end=0.005)


def entry(hotkey: str, losses: list[float], commit_round: int) -> Entry:
    return Entry(hotkey, hotkey * 8, commit_round, f"tie-{hotkey}", tuple(losses))


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
