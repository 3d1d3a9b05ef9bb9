"""Which older models stay in the order as references (competition.references.split),
and how standings pay a hotkey that holds a reference (scoring.earners)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypertrain.competition.references import Candidate, split
from hypertrain.competition.scoring import Entry, standings
from hypertrain.competition.spec import EpsilonSchedule

CONST = EpsilonSchedule(kind="constant", start=0.005, end=0.005)
V = bool | None


def c(name: str, commit_round: int, counted: V = None) -> Candidate:
    """``name`` is hotkey then model: "L1" is hotkey L's model 1."""
    return Candidate(name[0], name, commit_round, commit_round * 10 + int(name[1:]), counted)


# (candidates, expected references); entries are always each hotkey's newest model; a
# candidate's verdict is whether it counted in any settled cycle (None: never scored)
TABLE: list[tuple[str, list[Candidate], list[str]]] = [
    ("alone, a leader's successor replaces its model: nobody stands behind it",
     [c("L1", 1, True), c("L2", 5, True)], []),
    ("a successor not judged yet keeps its predecessor as its bar",
     [c("L1", 1, True), c("L2", 5)], ["L1"]),
    ("a successor that did not count keeps it (the hotkey is paid for L1)",
     [c("L1", 1, True), c("L2", 5, False)], ["L1"]),
    ("the dormant copy: C1 committed behind L1, did not count",
     [c("L1", 1, True), c("C1", 2, False), c("L2", 5, True)], ["L1"]),
    ("the dormant copy before any cycle judged either",
     [c("L1", 1), c("C1", 2), c("L2", 3)], ["L1"]),
    ("a copy committed after the successor stands behind the successor, not L1",
     [c("L1", 1, True), c("L2", 5, True), c("C1", 6, False)], []),
    ("a model scored and never counted (junk) is never a reference",
     [c("L1", 1, False), c("C1", 2, False), c("L2", 5)], []),
    ("a counted model between the reference and the newcomer is the newcomer's bar",
     [c("L1", 1, True), c("X1", 3, True), c("C1", 4, False), c("L2", 5, True)], []),
    ("a newcomer in the same round as the next counted model still needs the bar",
     [c("L1", 1, True), c("X1", 3, True), c("C1", 3, False), c("L2", 5, True)], ["L1"]),
    ("the verdict is whether a model ever counted: the leader's model that failed on one"
     " cycle's pages (counted earlier) is still the bar of the copy and the successor",
     [c("P1", 0, True), c("L1", 1, True), c("C1", 2, False), c("L2", 5, False)], ["L1"]),
    ("a copy that counted once (it beat the bar on some cycle's pages) stands behind nobody",
     [c("P1", 0, True), c("L1", 1, True), c("C1", 2, True), c("L2", 5, False)], []),
    ("only the last of a hotkey's models of one round is listed",
     [c("L1", 1, True), c("L2", 1, True), c("C1", 2, False), c("L3", 5, True)], ["L2"]),
    ("everyone counted: no references",
     [c("A1", 1, True), c("B1", 2, True), c("A2", 3, True), c("B2", 4, True)], []),
]  # fmt: skip


@pytest.mark.parametrize(("why", "candidates", "expected"), TABLE, ids=[t[0] for t in TABLE])
def test_references_table(why: str, candidates: list[Candidate], expected: list[str]) -> None:
    entries, references = split(candidates)
    newest = {x.hotkey: x.model_sha for x in sorted(candidates, key=lambda x: x.order)}
    assert {e.model_sha for e in entries} == set(newest.values())
    assert [r.model_sha for r in references] == expected, why


VERDICTS = st.sampled_from([True, False, None])


@given(st.lists(st.tuples(st.sampled_from("ABCD"), st.integers(1, 30), VERDICTS),
                min_size=1, max_size=24))  # fmt: skip
def test_references_are_bounded_by_the_models_they_stand_in_front_of(
    rows: list[tuple[str, int, V]],
) -> None:
    """Every reference stands in front of an uncounted newest model: none when every
    newest model counts, and of the judged ones at most one per hotkey (4 here) for each
    such model; a model that never counted is never one."""
    candidates = [Candidate(h, f"{h}{i}", r, i, v) for i, (h, r, v) in enumerate(rows)]
    entries, references = split(candidates)
    behind = [e for e in entries if e.counted is not True]
    judged = [r for r in references if r.counted is not None]
    assert len(judged) <= len(behind) * 4
    if not behind:
        assert references == []
    assert all(r.counted is not False for r in references)
    assert len({(r.hotkey, r.commit_round) for r in references}) == len(references)


def e(hotkey: str, model: str, losses: list[float], commit_round: int) -> Entry:
    return Entry(hotkey, model, commit_round, commit_round, tuple(losses))


def test_a_hotkey_is_paid_for_its_newest_model_that_counts() -> None:
    old = e("L", "L1", [2.0] * 8, 1)
    copy = e("C", "C1", [2.0] * 8, 2)  # a perturbed copy of L1, behind it
    sub_epsilon = e("L", "L2", [2.0 * 0.997] * 8, 5)  # 0.3 %: does not count
    table = {s.model_sha: s for s in standings([old, copy, sub_epsilon], CONST, 9,
                                               temperature=0.01, units=1000)}  # fmt: skip
    assert table["L1"].units == 1000 and not table["C1"].counted
    assert not table["L2"].counted
    better = e("L", "L3", [2.0 * 0.99] * 8, 6)  # 1 %: counts, and the hotkey is paid for it
    table = {s.model_sha: s for s in standings([old, copy, better], CONST, 9,
                                               temperature=0.01, units=1000)}  # fmt: skip
    assert table["L3"].units == 1000
    assert table["L1"].counted and table["L1"].units == 0 and table["L1"].comparisons == 0


@given(st.lists(st.tuples(st.sampled_from("ABC"),
                          st.lists(st.floats(0.5, 9), min_size=6, max_size=6)),
                min_size=1, max_size=8))  # fmt: skip
def test_with_references_units_sum_exactly_and_the_best_gets_95_percent(
    rows: list[tuple[str, list[float]]],
) -> None:
    entries = [e(h, f"{h}{i}", losses, i) for i, (h, losses) in enumerate(rows)]
    table = standings(entries, CONST, 40, temperature=0.01, units=1_000_000)
    assert sum(s.units for s in table) == 1_000_000
    assert table[0].counted and table[0].units >= 950_000
    paid = [s for s in table if s.units > 0]
    assert len({s.hotkey for s in paid}) == len(paid)  # one paid model per hotkey


def test_recommitting_its_own_model_does_not_renew_the_leaders_epsilon() -> None:
    """With a linear schedule an old incumbent's epsilon has decayed; a leader that
    commits a perturbed copy of its own model keeps the old one as the bar (the copy is
    not judged, then does not count), so a newcomer still faces the decayed epsilon."""
    linear = EpsilonSchedule(kind="linear", start=0.01, end=0.005, decay_rounds=1000)
    rounds = {"L1": 0, "L2": 1000, "N1": 1010}
    fresh = [c(name, r) for name, r in rounds.items()]
    judged = [c("L1", 0, True), c("L2", 1000, False), c("N1", 1010)]
    for candidates in (fresh, judged):
        _, references = split(candidates)
        assert [r.model_sha for r in references] == ["L1"]
    losses = {"L1": 2.0, "L2": 2.0, "N1": 2.0 * 0.993}  # 0.7 %: over 0.5 %, under 1 %
    listed = [e(name[0], name, [losses[name]] * 8, r) for name, r in rounds.items()]
    table = {s.model_sha: s for s in standings(listed, linear, 1020, temperature=0.01,
                                               units=1000)}  # fmt: skip
    assert table["N1"].units >= 950 and not table["L2"].counted


def test_a_copy_behind_a_reference_must_beat_it_when_the_reference_fails_that_cycle() -> None:
    """One cycle's pages favour P over the leader's M (M wins 4 of 8 pages: it does not
    count); the copy C behind M, a shade better, wins 5 of 8 against P but only 1 of 8
    against M. Judged against P alone, C would count and the leader's successor M2 would
    have to beat C; with M a reference, C must beat M, and neither C nor M2 counts."""
    p = e("Q", "Q1", [2.0] * 8, 0)
    m = e("L", "L1", [1.98] * 4 + [2.0] * 4, 1)
    copy = e("C", "C1", [1.98] * 5 + [2.0] * 3, 2)
    m2 = e("L", "L2", [x * 0.997 for x in m.losses], 5)
    free = {s.model_sha: s for s in standings([p, m, copy, m2], CONST, 9,
                                              temperature=0.01, units=1000)}  # fmt: skip
    assert free["C1"].counted and free["C1"].units == 1000  # the copy's lucky cycle
    refs = frozenset({"L1"})
    held = {s.model_sha: s for s in standings([p, m, copy, m2], CONST, 9, temperature=0.01,
                                              units=1000, references=refs)}  # fmt: skip
    assert not held["C1"].counted and not held["L2"].counted and not held["L1"].counted
    assert held["Q1"].units == 1000


def test_a_reference_bars_nobody_after_a_later_model_that_counts() -> None:
    """The reference L1 fails this cycle; X, committed after it, beats P and L1 and
    counts; N beats X (5 of 8 pages) but not L1 (2 of 8). X is N's bar, not L1: a
    reference is a bar only up to the next round whose model counts."""
    p = e("Q", "Q1", [2.0] * 8, 0)
    ref = e("L", "L1", [1.98] * 4 + [2.0] * 4, 1)
    x = e("X", "X1", [2.1] * 3 + [1.95] * 5, 3)
    n = e("N", "N1", [2.05] * 3 + [1.94] * 2 + [2.0] * 3, 5)
    junk = e("L", "L2", [5.0] * 8, 6)
    table = {s.model_sha: s for s in standings([p, ref, x, n, junk], CONST, 9,
                                               temperature=0.01, units=1000,
                                               references=frozenset({"L1"}))}  # fmt: skip
    assert not table["L1"].counted and table["X1"].counted and table["N1"].counted
    assert not table["L2"].counted
