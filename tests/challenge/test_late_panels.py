"""A missed assignment's late verdicts decide by the audit phase's majority, or hold.

Three listed auditors; island 0's audit misses its window. The first late verdict opens
the assignment's late window: it alone judges nothing (the island stays held and listed
at ``/reassigned``), a second verdict makes the strict majority, and a window that
closes short of it leaves the island held: never paid on one word, never burned on none.
"""

from __future__ import annotations

from hypertrain.challenge.rule import PENDING_AUDIT
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    RUN,
    THIRD_AUDITOR,
    Service,
    commit_round_0,
    merge_and_settle,
    post_verdict,
    three,
)

__all__ = ["three"]  # the fixture, by name
ISLAND = ISLANDS[0]


def _missed(svc: Service) -> list[str]:
    return [q["hotkey"] for q in svc.client.get(f"/v1/runs/{RUN}/reassigned").json() if q["missed"]]


def test_one_late_match_holds_until_a_majority_and_a_short_window_keeps_holding(
    three: Service,
) -> None:
    svc = three
    commit_round_0(svc)
    svc.tick(30)  # both audits missed their window
    assert post_verdict(svc, AUDITOR, ISLAND, "match", update_checked=True).status_code == 200
    assert ISLAND.ss58_address in _missed(svc)  # one late word: still offered to the others
    for key in (AUDITOR, OTHER_AUDITOR):  # island 1: two late verdicts, the majority
        assert post_verdict(svc, key, ISLANDS[1], "match", update_checked=True).status_code == 200
    assert ISLANDS[1].ss58_address not in _missed(svc)
    refused = post_verdict(svc, THIRD_AUDITOR, ISLANDS[1], "match", update_checked=True)
    assert refused.status_code == 409  # judged by the majority: the late window closed
    merge_and_settle(svc)  # far past the late window of island 0
    held = svc.ledger.held[(RUN, 0)]
    assert held[ISLAND.ss58_address] == PENDING_AUDIT  # one word never pays
    assert held.get(ISLANDS[1].ss58_address) != PENDING_AUDIT  # judged by the majority
    assert svc.ledger.faults == []  # and nothing is burned on no evidence
    assert ISLAND.ss58_address not in _missed(svc)  # the window is over
    late = post_verdict(svc, OTHER_AUDITOR, ISLAND, "match", update_checked=True)
    assert late.status_code == 409
