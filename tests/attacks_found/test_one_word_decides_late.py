"""Where one colluding auditor's word still decides alone, with three listed auditors.

docs/mechanism.md (Disputes, "The honest-majority assumption"): with three listed
auditors "one dishonest auditor can do nothing alone: its ``match`` against the third
auditor's ``mismatch`` is no quorum", and "no single contrary claim bars anyone".
docs/auditor.md: the audit phase closes early only on "a strict majority of the listed
auditors ... so one fast auditor cannot shut out a slower one's contrary verdict".

Two paths the quorum rule does not cover, both played on the real service with three
listed auditors (A and C honest, B colluding with island X):

* **the first late verdict decides.** X's audit misses its window (X uploads its
  checkpoint at the last moment of its upload deadline, so the honest replays finish after
  the window; or the honest auditors restart). The assignment is listed ``missed`` at
  ``/reassigned``; B posts ``match`` on it the moment it is listed. The service accepts a
  late verdict only "for an assignment that has no verdict yet", so A's true ``mismatch``
  (and C's) arriving after it are refused, and X is paid for a faked round on one word.
* **a lost game plus one word bars.** A misses one answer deadline of X's bisection game
  (``dispute.answer_rounds``, 30 s at the defaults; X can open one game per sybil it runs,
  all against A at once). The game is overturned and A's verdict set aside for a re-audit;
  B's single ``match`` re-audit bars A for the run and sets aside every other verdict A
  signed in a non-final round, although C's re-audit finds the same mismatch A did.
* **an island judges itself.** One key, one role per run covers verdicts and merge tapes
  only: a listed worker key that is also an island of the run signs ``match`` on its own
  audit, and on a missed audit that word is the only one the service takes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    RULES,
    RUN,
    THIRD_AUDITOR,
    Service,
    barred,
    commit_round_0,
    jury_run,
    merge_and_settle,
    post_verdict,
    three,
    verdict_of_check,
)
from tests.challenge.disputeplay import commitment as _commitment
from tests.challenge.disputeplay import open_body

__all__ = ["three"]  # the fixture, by name

HONEST_A, COLLUDER_B, HONEST_C = AUDITOR, OTHER_AUDITOR, THIRD_AUDITOR
CHEATER = ISLANDS[0]


def test_one_colluders_late_match_on_a_missed_audit_does_not_decide_alone(
    three: Service,
) -> None:
    """Proves the first late verdict on a missed audit is not a one-key decision: the
    honest auditors' later mismatches still count, and the cheater is not paid."""
    svc = three
    segment = sorted(commit_round_0(svc)["segments"])[0]
    svc.tick(30)  # X's audit missed its window: nobody judged it in time
    missed = [q["hotkey"] for q in svc.client.get(f"/v1/runs/{RUN}/reassigned").json()]
    assert CHEATER.ss58_address in missed
    lie = post_verdict(svc, COLLUDER_B, CHEATER, "match", update_checked=True)
    assert lie.status_code == 200, lie.text
    truths = [
        post_verdict(
            svc,
            key,
            CHEATER,
            "mismatch",
            update_checked=True,
            check="segment",
            first_bad_leaf=segment + 1,
        )
        for key in (HONEST_A, HONEST_C)
    ]
    for key in (HONEST_A, HONEST_C, COLLUDER_B):  # the other island is honest
        post_verdict(svc, key, ISLANDS[1], "match", update_checked=True)
    merge_and_settle(svc)
    paid = svc.ledger.settled.get((RUN, 0), {})
    assert CHEATER.ss58_address not in paid, (
        "one colluding auditor's late 'match' on a missed audit paid the cheater; the two"
        " honest auditors' mismatches were answered"
        f" {[(t.status_code, t.json().get('error')) for t in truths]}"
    )


def test_a_lost_game_and_one_colluding_reaudit_do_not_bar_an_honest_auditor(
    three: Service,
) -> None:
    """Proves that after a bisection game A lost by one missed deadline, one juror's
    ``match`` (against the other juror's ``mismatch``) is no evidence enough to bar A."""
    svc = three
    verdict_id, segments = verdict_of_check(svc, "segment")  # A's true catch of X's segment
    opened = svc.post("/v1/disputes", CHEATER, "dispute-open", open_body(verdict_id, segments[0]))
    assert opened.status_code == 200, opened.text
    dispute_id, game = opened.json()["dispute_id"], opened.json()["game"]
    assert game["stage"] != "recompute"  # a bisection game
    r = svc.post(
        f"/v1/disputes/{dispute_id}/answer", CHEATER, "dispute-answer", _commitment(game, "island")
    )
    assert r.status_code == 200, r.text
    svc.tick(4)  # A misses one answer deadline
    assert svc.client.get(f"/v1/disputes/{dispute_id}").json()["game"]["outcome"] == "overturned"
    lie = post_verdict(svc, COLLUDER_B, CHEATER, "match", update_checked=True)
    truth = post_verdict(
        svc,
        HONEST_C,
        CHEATER,
        "mismatch",
        update_checked=True,
        check="segment",
        first_bad_leaf=segments[0] + 1,
    )
    assert lie.status_code == 200, lie.text
    assert HONEST_A.ss58_address not in barred(svc), (
        "one lost answer deadline and one colluding re-audit barred the honest auditor for"
        f" the run; the other juror's mismatch was answered {truth.status_code}"
        f" {truth.json().get('error')}"
    )


@pytest.fixture
def self_listed(tmp_path: Path) -> Iterator[Service]:
    """The cheater's key is also one of the listed worker keys."""
    workers = (HONEST_A, COLLUDER_B, HONEST_C, CHEATER)
    with jury_run(tmp_path, {**RULES, "referees": []}, workers) as svc:
        yield svc


def test_an_island_that_is_also_a_listed_worker_cannot_judge_itself(
    self_listed: Service,
) -> None:
    """Proves a key never signs the verdict of its own island's audit."""
    svc = self_listed
    commit_round_0(svc)
    svc.tick(30)  # its audit missed the window: the first late verdict is the only one
    own = post_verdict(svc, CHEATER, CHEATER, "match", update_checked=True)
    assert own.status_code in (403, 409), (
        f"the island signed 'match' on its own audit and the service took it: {own.text}"
    )
