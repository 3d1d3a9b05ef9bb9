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
from tests.challenge import test_disputes as _disputes
from tests.challenge.disputeplay import commitment, open_body
from tests.challenge.helpers import TOKENS
from tests.challenge.test_disputes import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    RUN,
    ReplayStandIn,
    Service,
    _to_verdict,
    _verdict_on,
)
from tests.challenge.test_outsider_1 import _assignment

service = _disputes.service


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


def _lose_by_silence(svc: Service, island: Any, verdict_id: str, segment: int) -> None:
    opened = svc.post("/v1/disputes", island, "dispute-open", open_body(verdict_id, segment))
    assert opened.status_code == 200, opened.text
    dispute_id, game = opened.json()["dispute_id"], opened.json()["game"]
    body = commitment(game, "island")
    r = svc.post(f"/v1/disputes/{dispute_id}/answer", island, "dispute-answer", body)
    assert r.status_code == 200, r.text


def test_two_slow_auditors_rejudge_each_others_set_aside_audits(
    service: Service, tmp_path: Path
) -> None:
    a_verdict, segment = _to_verdict(service)  # A: mismatch on island 0
    b = _verdict_on(service, OTHER_AUDITOR, ISLANDS[1], "mismatch")
    assert b.status_code == 200, b.text
    _lose_by_silence(service, ISLANDS[0], a_verdict, segment)
    b_segment = _assignment(service, ISLANDS[1])["segments"][0]
    _lose_by_silence(service, ISLANDS[1], b.json()["verdict_id"], b_segment)
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
