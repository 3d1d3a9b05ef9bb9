"""The settlement rule as a table: commits, tape and standing verdicts in, outcome out."""

from __future__ import annotations

from typing import Any

import pytest

from hypertrain.challenge.rule import (
    PENDING_AUDIT,
    PROBATION_HOLD,
    LatePanel,
    Outcome,
    Probation,
    Standing,
    StandingVerdict,
    VerdictResult,
    agreeing,
    decide,
    earlier_faults,
    earlier_unproven,
    jury_standing,
    late_standing,
    probation_holds,
    standing,
)
from tests.challenge.rule_cases import COMMITS, A, B
from tests.challenge.rule_cases import merge_tape as _tape


def _v(
    hotkey: str, result: VerdictResult, standing: Standing = "stands", vid: str = "v1"
) -> StandingVerdict:
    return StandingVerdict(vid, 0, hotkey, "auditor", result, standing)


def _r(
    index: int,
    hotkey: str,
    result: VerdictResult,
    standing: Standing = "stands",
    final: bool = False,
) -> StandingVerdict:
    return StandingVerdict(f"v{index}", index, hotkey, "auditor", result, standing, final)


PROVEN_A = "earlier fault proven in round 0: mismatch verdict v0 by auditor"


CASES: list[tuple[str, dict[str, Any], Outcome]] = [
    ("included, no audit: paid", {"tape": _tape([A, B])}, Outcome({A: 10, B: 20})),
    ("no tape: nobody paid", {"tape": None},
     Outcome(unpaid={A: "not included in the merge", B: "not included in the merge"})),
    ("a standing mismatch faults", {"tape": _tape([A, B]), "verdicts": [_v(A, "mismatch")]},
     Outcome({B: 20}, faults={A: "mismatch verdict v1 by auditor"})),
    ("unverifiable is a fault too", {"tape": _tape([B], {A: "audit_mismatch"}),
                                     "verdicts": [_v(A, "unverifiable")]},
     Outcome({B: 20}, faults={A: "unverifiable verdict v1 by auditor"})),
    ("an overturned mismatch is paid though the merge left it out",
     {"tape": _tape([B], {A: "audit_mismatch"}), "verdicts": [_v(A, "mismatch", "overturned")],
      "assigned": [A]},
     Outcome({A: 10, B: 20})),
    ("a set-aside verdict holds the reward until another auditor judges",
     {"tape": _tape([A, B]), "verdicts": [_v(A, "match", "set_aside")], "assigned": [A]},
     Outcome({A: 10, B: 20}, held={A: PENDING_AUDIT})),
    ("a set-aside mismatch is no fault",
     {"tape": _tape([A, B]), "verdicts": [_v(A, "mismatch", "set_aside")], "assigned": [A]},
     Outcome({A: 10, B: 20}, held={A: PENDING_AUDIT})),
    ("re-judged: the new verdict decides",
     {"tape": _tape([A, B]), "assigned": [A],
      "verdicts": [_v(A, "match", "set_aside", "v1"), _v(A, "mismatch", "stands", "v2")]},
     Outcome({B: 20}, faults={A: "mismatch verdict v2 by auditor"})),
    ("assigned and unjudged: held", {"tape": _tape([A, B]), "assigned": [A, B],
                                     "verdicts": [_v(B, "match")]},
     Outcome({A: 10, B: 20}, held={A: PENDING_AUDIT})),
    ("probation holds until its end", {"tape": _tape([A, B]), "probation": {A: 7, "gone": 9}},
     Outcome({A: 10, B: 20}, held={A: 7})),
    ("a blob the tape calls missing is unpaid, never a fault on the tape's word",
     {"tape": _tape([B], {A: "missing_blob"})}, Outcome({B: 20}, unpaid={A: "missing_blob"})),
    ("a tape's malformed or zero-norm exclusion is unpaid too",
     {"tape": _tape([], {A: "malformed", B: "zero_norm"})},
     Outcome(unpaid={A: "malformed", B: "zero_norm"})),
    ("a norm outlier is unpaid, not faulted", {"tape": _tape([B], {A: "norm_outlier"})},
     Outcome({B: 20}, unpaid={A: "norm_outlier"})),
    ("a fault is never held", {"tape": _tape([A, B]), "assigned": [B],
                               "verdicts": [_v(A, "mismatch")], "probation": {A: 5}},
     Outcome({B: 20}, held={B: PENDING_AUDIT}, faults={A: "mismatch verdict v1 by auditor"})),
    ("an earlier round's unproven audit holds this round's reward",
     {"tape": _tape([A, B]), "earlier": [A]}, Outcome({A: 10, B: 20}, held={A: PENDING_AUDIT})),
    ("held for an earlier round outranks probation", {"tape": _tape([A, B]), "earlier": [A],
                                                      "probation": {A: 7}},
     Outcome({A: 10, B: 20}, held={A: PENDING_AUDIT})),
    ("an earlier hold of an island this round did not pay holds nothing",
     {"tape": _tape([B]), "earlier": [A]},
     Outcome({B: 20}, unpaid={A: "not included in the merge"})),
    ("a fault outvoted by the judges' majority of match is no fault, the island is paid",
     {"tape": _tape([A, B]), "assigned": [A],
      "verdicts": [_v(A, "unverifiable", "outvoted", "v1"), _v(A, "match", "stands", "v2")]},
     Outcome({A: 10, B: 20})),
    ("a split (no majority either way) is no fault but holds the reward",
     {"tape": _tape([A, B]), "assigned": [A],
      "verdicts": [_v(A, "mismatch", "split", "v1"), _v(A, "match", "stands", "v2")]},
     Outcome({A: 10, B: 20}, held={A: PENDING_AUDIT})),
    ("a held dispute (no quorum, only matches) is no fault but holds the reward",
     {"tape": _tape([B], {A: "audit_mismatch"}), "assigned": [A],
      "verdicts": [_v(A, "unverifiable", "held", "v1"), _v(A, "match", "stands", "v2")]},
     Outcome({A: 10, B: 20}, held={A: PENDING_AUDIT})),
    ("a late verdict short of its panel's majority judges nothing: held",
     {"tape": _tape([A, B]), "assigned": [A], "verdicts": [_v(A, "match", "waiting")]},
     Outcome({A: 10, B: 20}, held={A: PENDING_AUDIT})),
    ("a waiting late mismatch is no fault yet: held, never burned",
     {"tape": _tape([A, B]), "assigned": [A], "verdicts": [_v(A, "mismatch", "waiting")]},
     Outcome({A: 10, B: 20}, held={A: PENDING_AUDIT})),
    ("a proven earlier fault forfeits the reward: escrowed, held, burned",
     {"tape": _tape([A, B]), "proven": {A: PROVEN_A}},
     Outcome({A: 10, B: 20}, held={A: PENDING_AUDIT}, forfeited={A: PROVEN_A})),
    ("a proven earlier fault outranks probation and this round's match",
     {"tape": _tape([A, B]), "proven": {A: PROVEN_A}, "probation": {A: 7},
      "assigned": [A], "verdicts": [_v(A, "match")]},
     Outcome({A: 10, B: 20}, held={A: PENDING_AUDIT}, forfeited={A: PROVEN_A})),
    ("a fault of this round is its own fault, not a forfeit",
     {"tape": _tape([B], {A: "audit_mismatch"}), "verdicts": [_v(A, "mismatch")],
      "proven": {A: PROVEN_A}},
     Outcome({B: 20}, faults={A: "mismatch verdict v1 by auditor"})),
    ("a forfeit of an island this round did not pay burns nothing here",
     {"tape": _tape([B]), "proven": {A: PROVEN_A}},
     Outcome({B: 20}, unpaid={A: "not included in the merge"})),
]  # fmt: skip

# (earlier rounds' assignments, their verdicts) -> islands whose round-2 reward is held
EARLIER: list[tuple[str, list[tuple[int, str]], list[StandingVerdict], frozenset[str]]] = [
    ("no earlier audit", [], [], frozenset()),
    ("assigned, no verdict yet", [(0, A)], [], frozenset({A})),
    ("a standing match proves it", [(0, A)], [_r(0, A, "match")], frozenset()),
    ("a standing mismatch keeps it held", [(0, A)], [_r(0, A, "mismatch")], frozenset({A})),
    ("an overturned mismatch releases it", [(0, A)], [_r(0, A, "mismatch", "overturned")],
     frozenset()),
    ("a set-aside verdict has not judged it", [(1, A)], [_r(1, A, "match", "set_aside")],
     frozenset({A})),
    ("a proof in another round does not count", [(0, A)], [_r(1, A, "match")], frozenset({A})),
    ("this round's and later audits are not earlier", [(2, A), (3, B)], [], frozenset()),
    ("any unproven earlier round holds", [(0, A), (1, A)], [_r(0, A, "match")],
     frozenset({A})),
    ("a final mismatch is proven: it forfeits, it no longer holds", [(0, A)],
     [_r(0, A, "mismatch", final=True)], frozenset()),
    ("a final overturned mismatch releases it", [(0, A)],
     [_r(0, A, "mismatch", "overturned", final=True)], frozenset()),
    ("a final set-aside verdict has still not judged it", [(0, A)],
     [_r(0, A, "match", "set_aside", final=True)], frozenset({A})),
]  # fmt: skip

# the run's verdicts -> islands whose round-2 reward a proven earlier fault forfeits
PROVEN: list[tuple[str, list[StandingVerdict], dict[str, str]]] = [
    ("no verdict", [], {}),
    ("a fault that may still change is not proven", [_r(0, A, "mismatch")], {}),
    ("a final fault is proven", [_r(0, A, "mismatch", final=True)], {A: PROVEN_A}),
    ("a final unverifiable is proven too", [_r(0, A, "unverifiable", final=True)],
     {A: "earlier fault proven in round 0: unverifiable verdict v0 by auditor"}),
    ("an overturned fault is none", [_r(0, A, "mismatch", "overturned", final=True)], {}),
    ("a set-aside fault is none", [_r(0, A, "mismatch", "set_aside", final=True)], {}),
    ("a final match is none", [_r(0, A, "match", final=True)], {}),
    ("this round's and later faults are not earlier",
     [_r(2, A, "mismatch", final=True), _r(3, B, "mismatch", final=True)], {}),
    ("the first proven round is the reason",
     [_r(1, A, "mismatch", final=True), _r(0, A, "mismatch", final=True)], {A: PROVEN_A}),
]  # fmt: skip


# P = 2: (island, assigned audits, verdicts) -> the hold of its probation rewards
SERVED = Probation(until=2, last_committed=True, open_rounds=0)
PROBATION: list[tuple[str, Probation, list[tuple[int, str]], list[StandingVerdict], int]] = [
    ("committed every round, both audits matched: released at u", SERVED,
     [(0, A), (1, A)], [_r(0, A, "match", final=True), _r(1, A, "match")], 2),
    ("sat out after one round: its first reward has no release round yet",
     Probation(until=2, last_committed=False, open_rounds=0),
     [(0, A)], [_r(0, A, "match", final=True)], PROBATION_HOLD),
    ("sat out and came back for its second probation round: released at the new u",
     Probation(until=5, last_committed=True, open_rounds=0),
     [(0, A), (4, A)], [_r(0, A, "match", final=True), _r(4, A, "match")], 5),
    ("came back, but that round is not final yet: still held",
     Probation(until=5, last_committed=True, open_rounds=1),
     [(0, A), (4, A)], [_r(0, A, "match", final=True), _r(4, A, "match")], PROBATION_HOLD),
    ("left during probation: never served, never released",
     Probation(until=2, last_committed=False, open_rounds=0),
     [(0, A)], [_r(0, A, "match", final=True)], PROBATION_HOLD),
    ("a probation audit with no verdict yet keeps everything held", SERVED,
     [(0, A), (1, A)], [_r(0, A, "match", final=True)], PROBATION_HOLD),
    ("a probation fault that may still change keeps everything held", SERVED,
     [(0, A), (1, A)], [_r(0, A, "match", final=True), _r(1, A, "mismatch")], PROBATION_HOLD),
    ("an unproven audit after probation does not hold its probation rewards", SERVED,
     [(0, A), (1, A), (2, A)], [_r(0, A, "match", final=True), _r(1, A, "match")], 2),
    ("another island's unproven audit changes nothing", SERVED,
     [(0, A), (1, A), (1, B)], [_r(0, A, "match", final=True), _r(1, A, "match")], 2),
]  # fmt: skip


@pytest.mark.parametrize(("case", "island", "assigned", "verdicts", "hold"), PROBATION,
                         ids=[c[0] for c in PROBATION])  # fmt: skip
def test_probation_holds(
    case: str,
    island: Probation,
    assigned: list[tuple[int, str]],
    verdicts: list[StandingVerdict],
    hold: int,
) -> None:
    assert probation_holds({A: island}, assigned, verdicts) == {A: hold}, case


def test_an_unserved_probation_hold_is_not_a_pending_audit() -> None:
    got = decide(COMMITS, _tape([A, B]), [], [A], {A: PROBATION_HOLD, B: PROBATION_HOLD})
    assert got.held == {A: PENDING_AUDIT, B: PROBATION_HOLD} and got.pending == frozenset({A})


@pytest.mark.parametrize(("case", "verdicts", "proven"), PROVEN, ids=[c[0] for c in PROVEN])
def test_earlier_faults(case: str, verdicts: list[StandingVerdict], proven: dict[str, str]) -> None:
    assert earlier_faults(2, verdicts) == proven, case


@pytest.mark.parametrize(("case", "assigned", "verdicts", "held"), EARLIER,
                         ids=[c[0] for c in EARLIER])  # fmt: skip
def test_earlier_unproven(
    case: str,
    assigned: list[tuple[int, str]],
    verdicts: list[StandingVerdict],
    held: frozenset[str],
) -> None:
    assert earlier_unproven(2, assigned, verdicts) == held, case


@pytest.mark.parametrize(("case", "given", "expected"), CASES, ids=[c[0] for c in CASES])
def test_decide(case: str, given: dict[str, Any], expected: Outcome) -> None:
    got = decide(
        COMMITS,
        given["tape"],
        given.get("verdicts", []),
        given.get("assigned", ()),
        given.get("probation"),
        given.get("earlier", ()),
        given.get("proven"),
    )
    assert got == expected, case


def test_pending_is_the_held_for_a_verdict() -> None:
    got = decide(COMMITS, _tape([A, B]), [], [A], {B: 3})
    assert got.pending == frozenset({A}) and got.held == {A: PENDING_AUDIT, B: 3}


def _late(auditor: str, result: VerdictResult, received: int, hotkey: str = A) -> StandingVerdict:
    return StandingVerdict(f"v-{auditor}", 0, hotkey, auditor, result, "stands", False, received)


PANEL = LatePanel(0, A, opened=10, jury=frozenset({"a1", "a2", "a3"}))
LATE_CASES: list[tuple[str, list[StandingVerdict], list[LatePanel], list[Standing]]] = [
    ("one late verdict of a jury of three waits", [_late("a1", "match", 10)], [PANEL], ["waiting"]),
    (
        "two of three: a strict majority, both count",
        [_late("a1", "match", 10), _late("a2", "mismatch", 12)],
        [PANEL],
        ["stands", "stands"],
    ),
    (
        "a key outside the jury counts nothing",
        [_late("a1", "match", 10), _late("x", "match", 11)],
        [PANEL],
        ["waiting", "waiting"],
    ),
    (
        "a verdict from before the panel opened is not late",
        [_late("a1", "match", 9)],
        [PANEL],
        ["stands"],
    ),
    (
        "another island's verdict is not the panel's",
        [_late("a1", "match", 10, B)],
        [PANEL],
        ["stands"],
    ),
    (
        "no auditor set known: the first verdict decides",
        [_late("x", "match", 10)],
        [LatePanel(0, A, 10, frozenset())],
        ["stands"],
    ),
    ("no panel: nothing changes", [_late("a1", "match", 10)], [], ["stands"]),
]


@pytest.mark.parametrize(
    ("case", "verdicts", "panels", "expected"), LATE_CASES, ids=[c[0] for c in LATE_CASES]
)
def test_late_standing(
    case: str, verdicts: list[StandingVerdict], panels: list[LatePanel], expected: list[Standing]
) -> None:
    assert [v.standing for v in late_standing(verdicts, panels)] == expected, case


def test_held_and_waiting_verdicts_neither_fault_nor_judge_alike() -> None:
    held, waiting = _v(A, "unverifiable", "held"), _v(A, "mismatch", "waiting")
    assert (held.fault, held.judged, held.holds) == (False, True, True)
    assert (waiting.fault, waiting.judged, waiting.holds) == (False, False, False)


def _j(auditor: str, result: VerdictResult, standing: Standing = "stands",
       upheld: bool = False, hotkey: str = A) -> StandingVerdict:  # fmt: skip
    vid = f"{hotkey}-{auditor}"
    return StandingVerdict(vid, 0, hotkey, auditor, result, standing, upheld=upheld)


JURY_CASES: list[tuple[str, list[StandingVerdict], list[Standing]]] = [
    (
        "one liar against two matches is outvoted",
        [_j("a1", "unverifiable"), _j("a2", "match"), _j("a3", "match")],
        ["outvoted", "stands", "stands"],
    ),
    (
        "two faults against one match stand (the honest-majority assumption)",
        [_j("a1", "mismatch"), _j("a2", "unverifiable"), _j("a3", "match")],
        ["stands", "stands", "stands"],
    ),
    (
        "one match, one mismatch, one silent: split (held)",
        [_j("a1", "mismatch"), _j("a2", "match")],
        ["split", "stands"],
    ),
    ("a lone fault verdict stands (its dispute decides)", [_j("a1", "mismatch")], ["stands"]),
    (
        "a fault a dispute upheld stands against any count",
        [_j("a1", "mismatch", upheld=True), _j("a2", "match"), _j("a3", "match")],
        ["stands", "stands", "stands"],
    ),
    (
        "set-aside and waiting verdicts are no judges",
        [_j("a1", "mismatch"), _j("a2", "match", "set_aside"), _j("a3", "match", "waiting")],
        ["stands", "set_aside", "waiting"],
    ),
    (
        "an overturned fault is no judge of the rest",
        [_j("a1", "mismatch", "overturned"), _j("a2", "mismatch"), _j("a3", "match")],
        ["overturned", "split", "stands"],
    ),
    (
        "each island is counted apart",
        [_j("a1", "mismatch"), _j("a2", "match", hotkey=B), _j("a3", "match", hotkey=B)],
        ["stands", "stands", "stands"],
    ),
]


@pytest.mark.parametrize(("case", "verdicts", "expected"), JURY_CASES,
                         ids=[c[0] for c in JURY_CASES])  # fmt: skip
def test_jury_standing(
    case: str, verdicts: list[StandingVerdict], expected: list[Standing]
) -> None:
    assert [v.standing for v in jury_standing(verdicts)] == expected, case


def test_one_liar_among_honest_judges_cannot_fault_and_a_split_holds() -> None:
    """The one standing (late panels, then the judges' majority) decides settlement."""
    lie = [_j("a1", "unverifiable"), _j("a2", "match"), _j("a3", "match")]
    assert decide(COMMITS, _tape([A, B]), standing(lie, []), [A]) == Outcome({A: 10, B: 20})
    split = [_j("a1", "mismatch"), _j("a2", "match")]
    assert decide(COMMITS, _tape([A, B]), standing(split, []), [A]) == Outcome(
        {A: 10, B: 20}, held={A: PENDING_AUDIT}
    )
    outvoted, split_v = _j("a1", "mismatch", "outvoted"), _j("a1", "mismatch", "split")
    assert (outvoted.fault, outvoted.judged, outvoted.holds) == (False, True, False)
    assert (split_v.fault, split_v.judged, split_v.holds) == (False, True, True)


def test_agreeing_counts_one_side_by_the_one_standing() -> None:
    """A split is no agreement; an outvoted lie adds nothing; listed keys only."""
    split = standing([_j("a1", "mismatch"), _j("a2", "match")], [])
    assert agreeing(split, {"a1", "a2", "a3"}) == {A: 1}
    lie = standing([_j("a1", "unverifiable"), _j("a2", "match"), _j("a3", "match")], [])
    assert agreeing(lie, {"a1", "a2", "a3"}) == {A: 2}
    assert agreeing(lie, {"a2"}) == {A: 1}
    two = standing([_j("a1", "mismatch"), _j("a2", "unverifiable"), _j("a3", "match")], [])
    assert agreeing(two, {"a1", "a2", "a3"}) == {A: 2}
