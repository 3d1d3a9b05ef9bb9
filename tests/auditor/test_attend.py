"""A dispute answer never waits behind an island-controlled wait.

The auditor posts ``mismatch`` on a cheater, then waits for a sybil's withheld selected
checkpoint until the upload deadline. The cheater disputes at once. The auditor's wait
polls the relay; at every poll it answers its pending games (``Auditor.attend``, set by
``follow``), so it commits its answer within the game's deadline and the honest verdict
is not overturned. Single-threaded: the scripted relay steps the beacon one round per
poll, so nothing depends on timing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hypertrain.api.client import ChallengeClient
from hypertrain.auditor.follow import attending
from hypertrain.auditor.replay import AuditOutcome
from hypertrain.auditor.runner import Auditor, RoundRecords, audit_round
from hypertrain.dispute.messages import DisputeAnswer
from hypertrain.evidence.errors import IslandInputError
from hypertrain.evidence.index import upload_deadline
from hypertrain.protocol.messages import AuditAssignment
from hypertrain.relay.errors import NotFoundError
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    RUN,
    Service,
    commit_round_0,
    service,
)
from tests.challenge.disputeplay import answer, commitment, open_body
from tests.challenge.helpers import TOKENS

__all__ = ["service"]  # answer_rounds 3, audit window 20, one auditor


class StandInParty:
    """The auditor's replay of the disputed segment as the game sees it (its answers)."""

    def __init__(self) -> None:
        self.reveals: dict[int, DisputeAnswer] = {}

    def answer(self, game: Any) -> DisputeAnswer:
        return DisputeAnswer.model_validate(answer(game.model_dump(mode="json"), "auditor", 1, ""))


@dataclass(frozen=True, slots=True)
class HonestAuditor(Auditor):
    """The real auditor; only X's replay result is given (the replay is tested elsewhere)."""

    cheater: str = ""
    withholding_sybil: bool = True

    def judge(self, detail: RoundRecords, assignment: AuditAssignment) -> AuditOutcome:
        segments = tuple(sorted(assignment.segments))
        if assignment.hotkey == self.cheater:
            return AuditOutcome(
                "mismatch", segments[0] + 1, False, "replay differs", segments, "segment"
            )
        if not self.withholding_sybil:
            return AuditOutcome("match", None, True, "replayed", segments)
        deadline = upload_deadline(
            assignment.selection_beacon_round, self.manifest.round.audit_window_rounds
        )
        try:  # the real wait for a selected checkpoint the sybil withholds
            self.awaited_blob("ab" * 32, deadline)
        except IslandInputError as exc:
            return AuditOutcome("unverifiable", 0, False, str(exc), segments)
        raise AssertionError("the withheld checkpoint appeared")


class ScriptedRelay:
    """The sybil's checkpoint never appears; the cheater disputes at the first poll after
    the auditor's verdict on it, and each poll is one beacon round."""

    def __init__(self, svc: Service, cheater: Any) -> None:
        self.svc, self.cheater, self.dispute_id, self.polls = svc, cheater, "", 0

    def get(self, sha256: str, *, max_bytes: int = 1 << 32) -> bytes:
        self.polls += 1
        if not self.dispute_id:
            self.dispute_id = self.open()
        else:
            self.svc.tick()
        raise NotFoundError(sha256)

    def open(self) -> str:
        rows = self.svc.client.get(f"/v1/runs/{RUN}/rounds/0").json()["verdicts"]
        mine = next(v for v in rows if v["envelope"]["body"]["hotkey"] == self.cheater.ss58_address)
        body = open_body(mine["verdict_id"], mine["envelope"]["body"]["segments"][0])
        opened = self.svc.post("/v1/disputes", self.cheater, "dispute-open", body)
        assert opened.status_code == 200, opened.text
        dispute_id, game = opened.json()["dispute_id"], opened.json()["game"]
        path = f"/v1/disputes/{dispute_id}/answer"
        sent = self.svc.post(path, self.cheater, "dispute-answer", commitment(game, "island"))
        assert sent.status_code == 200, sent.text
        return str(dispute_id)


def test_an_upload_wait_answers_the_pending_game_in_time(
    service: Service, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(
        "hypertrain.auditor.disputes.party_of", lambda auditor, game: StandInParty()
    )
    cheater, sybil = ISLANDS
    assert cheater.ss58_address < sybil.ss58_address  # judged first
    commit_round_0(service)
    client = ChallengeClient(
        "http://testserver", worker_token=TOKENS["worker"], http=service.client
    )
    relay = ScriptedRelay(service, cheater)
    base = HonestAuditor(
        service=client,
        relay=relay,  # type: ignore[arg-type]
        key=AUDITOR,
        manifest=client.manifest(RUN),
        dataset_dir=tmp_path,
        upload_poll_s=0.0,
        cheater=cheater.ss58_address,
    )
    events: list[tuple[str, dict[str, Any]]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append((kind, fields))

    auditor = replace(base, attend=attending(base, {}, emit))
    outcomes = audit_round(auditor, 0, emit)
    assert [o.result for o in outcomes] == ["mismatch", "unverifiable"]  # the sybil withheld
    assert relay.polls > 3  # the wait outlasted the game's answer deadline (3 rounds)
    kinds = [k for k, _ in events]
    assert "dispute_commit" in kinds and "error" not in kinds, events
    view = service.client.get(f"/v1/disputes/{relay.dispute_id}").json()
    assert view["game"]["outcome"] != "overturned", view["game"]
