"""A missed assignment's late verdicts decide by the audit phase's majority, or hold.

Three listed auditors; island 0's audit misses its window. The first late verdict opens
the assignment's late window: it alone judges nothing (the island stays held and listed
at ``/reassigned``), a second verdict makes the strict majority, and a window that
closes short of it leaves the island held: never paid on one word, never burned on none.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hypertrain.challenge.rounds.rule import PENDING_AUDIT
from tests.attacks_found.test_one_word_decides_late import _merge_and_settle, _post_verdict, _start
from tests.challenge.test_dispute_rules import RULES, THIRD_AUDITOR
from tests.challenge.test_disputes import AUDITOR, ISLANDS, OTHER_AUDITOR, RUN, Service
from tests.challenge.test_outsider_1 import _commit_round_0

ISLAND = ISLANDS[0]


@pytest.fixture
def three(tmp_path: Path) -> Iterator[Service]:
    yield from _start(tmp_path, {**RULES, "referees": []}, (AUDITOR, OTHER_AUDITOR, THIRD_AUDITOR))


def _missed(svc: Service) -> list[str]:
    return [q["hotkey"] for q in svc.client.get(f"/v1/runs/{RUN}/reassigned").json() if q["missed"]]


def test_one_late_match_holds_until_a_majority_and_a_short_window_keeps_holding(
    three: Service,
) -> None:
    svc = three
    _commit_round_0(svc)
    svc.tick(30)  # both audits missed their window
    assert _post_verdict(svc, AUDITOR, ISLAND, "match").status_code == 200
    assert ISLAND.ss58_address in _missed(svc)  # one late word: still offered to the others
    for key in (AUDITOR, OTHER_AUDITOR):  # island 1: two late verdicts, the majority
        assert _post_verdict(svc, key, ISLANDS[1], "match").status_code == 200
    assert ISLANDS[1].ss58_address not in _missed(svc)
    refused = _post_verdict(svc, THIRD_AUDITOR, ISLANDS[1], "match")
    assert refused.status_code == 409  # judged by the majority: the late window closed
    _merge_and_settle(svc)  # far past the late window of island 0
    held = svc.ledger.held[(RUN, 0)]
    assert held[ISLAND.ss58_address] == PENDING_AUDIT  # one word never pays
    assert held.get(ISLANDS[1].ss58_address) != PENDING_AUDIT  # judged by the majority
    assert svc.ledger.faults == []  # and nothing is burned on no evidence
    assert ISLAND.ss58_address not in _missed(svc)  # the window is over
    late = _post_verdict(svc, OTHER_AUDITOR, ISLAND, "match")
    assert late.status_code == 409
