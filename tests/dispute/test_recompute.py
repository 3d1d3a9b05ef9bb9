"""A recompute dispute: decided by an independent re-audit of a quorum of the jury (or a
referee), upheld or held at its deadline, and the one rule for barring the auditor."""

from __future__ import annotations

import pytest

from hypertrain.dispute import game as g
from hypertrain.dispute.errors import DecidedError
from hypertrain.dispute.resolution import (
    bars,
    bars_auditor,
    expire,
    open_recompute,
    quorum,
    recomputed,
)
from tests.dispute.helpers import AUDITOR, ISLAND, REFEREE, commit, new_game, step_answer

REFEREES = frozenset({REFEREE})


def test_recompute_is_decided_by_an_independent_reaudit_or_upheld() -> None:
    rules = g.Rules(answer_rounds=3, referee_rounds=3, clock_rounds=5)
    game = open_recompute(
        dispute_id="e" * 64, run_id="run", round=1, segment=0, island=ISLAND,
        auditor=AUDITOR, check="update", rules=rules, now=10,
    )  # fmt: skip
    # decided within the bound: the last round a re-audit may come is opening + bound - 1
    assert game.stage == "recompute" and game.deadline_round == 10 + rules.bound_rounds() - 1
    assert not game.due("island") and not game.due("auditor")
    assert recomputed(game, AUDITOR, "match", 11) == game  # never the verdict's own auditor
    assert recomputed(game, "5Other", "match", 11) == game  # no jury: an unlisted key counts 0
    assert recomputed(game, REFEREE, "match", 11, REFEREES).outcome == "overturned"
    assert recomputed(game, REFEREE, "mismatch", 11, REFEREES).outcome == "upheld"
    assert bars_auditor(recomputed(game, REFEREE, "match", 11, REFEREES))
    assert expire(game, game.deadline_round) == game
    assert expire(game, 10 + rules.bound_rounds()).outcome == "upheld"
    with pytest.raises(DecidedError):
        commit(expire(game, 10_000), ISLAND, step_answer(new_game(8, 3), ISLAND, 3), 10_000)


JURY = ("5Juror1", "5Juror2", "5Juror3")


def _recompute(check: str = "update", jury: tuple[str, ...] = JURY) -> g.Game:
    return open_recompute(
        dispute_id="f" * 64, run_id="run", round=1, segment=0, island=ISLAND, auditor=AUDITOR,
        check=check, rules=g.Rules(), now=10, jury=(*jury, AUDITOR, ISLAND),  # type: ignore[arg-type]
    )  # fmt: skip


def test_recompute_needs_a_quorum_of_the_jury_never_the_first_answer() -> None:
    game = _recompute()
    assert game.jury == JURY and quorum(game) == 2  # the parties are never jurors
    one = recomputed(game, JURY[0], "match", 11)
    assert one.stage == "recompute" and one.reaudits == {JURY[0]: "match"}
    assert recomputed(one, JURY[0], "mismatch", 11) == one  # a juror's first re-audit only
    split = recomputed(one, JURY[1], "mismatch", 12)
    assert split.stage == "recompute"  # one each way: no quorum, the deadline upholds
    assert expire(split, split.deadline_round + 1).outcome == "upheld"
    overturned = recomputed(split, JURY[2], "match", 13)
    assert overturned.outcome == "overturned" and bars_auditor(overturned)
    upheld = recomputed(recomputed(game, JURY[1], "unverifiable", 11), JURY[2], "mismatch", 12)
    assert upheld.outcome == "upheld" and not bars_auditor(upheld)


def test_one_juror_overturns_but_never_bars_and_availability_never_bars() -> None:
    alone = recomputed(_recompute(jury=JURY[:1]), JURY[0], "match", 11)
    assert alone.outcome == "overturned" and not bars_auditor(alone)  # one claim is no proof
    assert quorum(_recompute(jury=())) == 0
    assert recomputed(_recompute(jury=()), JURY[0], "match", 11).stage == "recompute"
    served = _recompute("unverifiable")
    for juror in JURY:
        served = recomputed(served, juror, "match", 11)
    assert served.outcome == "overturned" and not bars_auditor(served)
    by_referee = recomputed(_recompute("unverifiable"), REFEREE, "match", 11, REFEREES)
    assert by_referee.outcome == "overturned" and not bars_auditor(by_referee)


def test_one_barring_rule_a_strict_majority_of_at_least_two_or_a_referee() -> None:
    assert not bars(JURY[:1], {JURY[0]: "match"})  # a jury of one: one claim never bars
    assert not bars(JURY, {JURY[0]: "match", JURY[1]: "mismatch"})
    assert bars(JURY, {JURY[0]: "match", JURY[1]: "match"})
    assert not bars(JURY, {"5Outsider": "match", JURY[0]: "match"})  # outside: counts 0
    assert bars((), {}, by_referee=True)
    five = tuple(f"5Juror{i}" for i in range(5))
    assert not bars(five, dict.fromkeys(five[:2], "match"))
    assert bars(five, dict.fromkeys(five[:3], "match"))


def test_an_unverifiable_overturn_bars_only_on_reaudits_made_by_the_upload_deadline() -> None:
    served = _recompute("unverifiable")
    for juror in JURY[:2]:
        served = recomputed(served, juror, "match", 11)
    assert served.outcome == "overturned"
    assert not bars_auditor(served)  # nothing says when the bytes were fetched
    assert not bars_auditor(served, frozenset(JURY[:1]))  # one timely re-audit is one claim
    assert bars_auditor(served, frozenset(JURY[:2]))  # two fetched them in time: a lie


def test_a_deadline_counts_the_live_jurors_and_holds_without_a_majority() -> None:
    one = recomputed(_recompute("unverifiable"), JURY[0], "match", 11)
    late = one.deadline_round + 1
    held = expire(one, late, frozenset(JURY))  # all live, one match, nobody against
    assert (held.outcome, held.steps[-1].actor) == ("held", "deadline")
    assert expire(one, late).outcome == "held"
    assert expire(_recompute("unverifiable"), late).outcome == "upheld"  # nobody re-audited
    split = recomputed(one, JURY[1], "mismatch", 12)
    assert expire(split, late, frozenset(JURY)).outcome == "upheld"
    idle = ("5Idle1", "5Idle2")  # listed, never signed a verdict of the run
    two = recomputed(
        recomputed(_recompute("unverifiable", (*JURY, *idle)), JURY[0], "match", 11),
        JURY[1],
        "match",
        12,
    )
    assert two.stage == "recompute"  # 2 of a jury of 5: no quorum yet
    decided = expire(two, late, frozenset(JURY))
    assert decided.outcome == "overturned" and decided.counted == JURY
    assert bars_auditor(decided, frozenset(JURY[:2]))
