"""The auditor's re-judging pass: a game it lost never stops it re-judging the others'.

A lost game sets only the disputed verdict aside; the auditor still re-judges every
other audit set aside for an independent re-audit (never its own). The service is the
real one; the segment replay is stood in for (as in tests/challenge/test_disputes.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypertrain.api.client import ChallengeClient
from hypertrain.auditor.disputes import answer_disputes
from hypertrain.auditor.replay import AuditOutcome
from hypertrain.auditor.runner import RoundRecords
from hypertrain.protocol.messages import AuditAssignment
from hypertrain.relay.client import RelayClient
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    RUN,
    ReplayStandIn,
    Service,
    assignment,
    lose_by_silence,
    service,
    to_verdict,
    verdict_on,
)
from tests.challenge.helpers import TOKENS

__all__ = ["service"]  # the fixture, by name


class Confirming(ReplayStandIn):
    """A replay that finds the island's first selected segment wrong (a cheating island)."""

    def judge(self, detail: RoundRecords, assignment: AuditAssignment) -> AuditOutcome:
        super().judge(detail, assignment)
        first = min(assignment.segments)
        return AuditOutcome("mismatch", first + 1, False, "re-judged", tuple(assignment.segments))


def _confirming(svc: Service, key: Any, tmp: Path, judged: list[tuple[int, str]]) -> Confirming:
    client = ChallengeClient("http://testserver", worker_token=TOKENS["worker"], http=svc.client)
    relay = RelayClient("http://127.0.0.1:9", None, RUN)
    return Confirming(client, relay, key, client.manifest(RUN), tmp, judged=judged)


def test_two_slow_auditors_rejudge_each_others_set_aside_audits(
    service: Service, tmp_path: Path
) -> None:
    a_verdict, segment = to_verdict(service)  # A: mismatch on island 0
    b = verdict_on(service, OTHER_AUDITOR, ISLANDS[1], "mismatch")
    assert b.status_code == 200, b.text
    lose_by_silence(service, a_verdict, segment, ISLANDS[0])
    b_segment = assignment(service, ISLANDS[1])["segments"][0]
    lose_by_silence(service, b.json()["verdict_id"], b_segment, ISLANDS[1])
    service.tick(4)  # both auditors missed their answer: both games overturned
    judged_a: list[tuple[int, str]] = []
    judged_b: list[tuple[int, str]] = []
    emit = lambda kind, **fields: None  # noqa: E731
    a = _confirming(service, AUDITOR, tmp_path, judged_a)
    b_auditor = _confirming(service, OTHER_AUDITOR, tmp_path, judged_b)
    assert answer_disputes(a, {}, emit) == 1
    assert answer_disputes(b_auditor, {}, emit) == 1
    assert judged_a == [(0, ISLANDS[1].ss58_address)]  # never its own set-aside verdict
    assert judged_b == [(0, ISLANDS[0].ss58_address)]
    assert service.client.get(f"/v1/runs/{RUN}/reassigned").json() == []
    assert answer_disputes(a, {}, emit) == answer_disputes(b_auditor, {}, emit) == 0
