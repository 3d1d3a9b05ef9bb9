"""A caught cheater overturns an honest verdict by keeping the auditor busy with a sybil.

docs/mechanism.md (Disputes): each answer is due ``dispute.answer_rounds`` beacon rounds after
its phase opened; "the auditor misses one (the island sent its own) | overturned (then
re-audited)". docs/auditor.md: the auditor "answers each query twice"; its ``--follow`` loop
audits a round's assignments one after the other and waits for a selected checkpoint "until
beacon round ``deadline`` (one round for every island ...); missing after it means withheld"
(``upload_deadline``: half the audit window after the selection).

The auditor posts each verdict as soon as it is judged, and answers disputes only between
rounds of audits. So the cheater X (judged first: hotkeys are audited in ascending order)
runs a sybil S whose hotkey sorts after it and withholds S's selected checkpoint. The auditor
posts ``mismatch`` on X, then blocks waiting for S's checkpoint until the upload deadline
(60 beacon rounds with the recipe's 120-round audit window; 10 here). X opens its dispute at
once and commits its answer; the auditor, blocked, misses its 3-round commitment deadline and
the honest verdict is overturned: X's fault is set aside and its reward no longer burned on
this verdict (with one auditor, no re-audit can ever come either).

The service, the dispute game and the auditor's ``follow`` loop (verdict posting, upload
wait, dispute answering) are the real ones; only the segment replay of X is stood in for
with its result (a mismatch, as the real replay of a cheater gives).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypertrain.auditor.replay import AuditOutcome
from hypertrain.auditor.runner import Auditor, RoundRecords, follow
from hypertrain.challenge.client import ChallengeClient
from hypertrain.dispute.messages import DisputeAnswer
from hypertrain.evidence.errors import IslandInputError
from hypertrain.evidence.index import upload_deadline
from hypertrain.protocol.messages import AuditAssignment
from hypertrain.relay.errors import NotFoundError
from tests.challenge import test_disputes as _disputes
from tests.challenge.disputeplay import answer, commitment, open_body
from tests.challenge.helpers import TOKENS
from tests.challenge.test_disputes import AUDITOR, ISLANDS, RUN, Service
from tests.challenge.test_outsider_1 import _commit_round_0

service = _disputes.service  # answer_rounds 3, audit window 20, one auditor


class EmptyRelay:
    """The relay as the auditor sees it: the sybil's selected checkpoint is not there (404)."""

    def get(self, sha256: str, *, max_bytes: int = 1 << 32) -> bytes:
        raise NotFoundError(sha256)


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


def _play(service: Service, tmp_path: Path, monkeypatch: Any, withholding_sybil: bool) -> str:
    monkeypatch.setattr(
        "hypertrain.auditor.disputes.party_of", lambda auditor, game: StandInParty()
    )
    cheater, sybil = ISLANDS
    assert cheater.ss58_address < sybil.ss58_address  # audited first
    _commit_round_0(service)
    client = ChallengeClient(
        "http://testserver", worker_token=TOKENS["worker"], http=service.client
    )
    auditor = HonestAuditor(
        service=client,
        relay=EmptyRelay(),  # type: ignore[arg-type]
        key=AUDITOR,
        manifest=client.manifest(RUN),
        dataset_dir=tmp_path,
        upload_poll_s=0.02,
        cheater=cheater.ss58_address,
        withholding_sybil=withholding_sybil,
    )
    stop = threading.Event()
    events: list[tuple[str, dict[str, Any]]] = []
    worker = threading.Thread(
        target=follow,
        args=(auditor,),
        kwargs={"poll_s": 0.02, "stop": stop.is_set, "emit": lambda k, **f: events.append((k, f))},
        daemon=True,
    )
    worker.start()
    try:
        verdict_id = ""
        for _ in range(500):  # the auditor posts its mismatch on X
            rows = service.client.get(f"/v1/runs/{RUN}/rounds/0").json()["verdicts"]
            mine = [v for v in rows if v["envelope"]["body"]["hotkey"] == cheater.ss58_address]
            if mine:
                verdict_id, segment = (
                    mine[0]["verdict_id"],
                    mine[0]["envelope"]["body"]["segments"][0],
                )
                break
            time.sleep(0.02)
        assert verdict_id, f"no verdict on the cheater: {events}"
        opened = service.post(
            "/v1/disputes", cheater, "dispute-open", open_body(verdict_id, segment)
        )
        assert opened.status_code == 200, opened.text
        dispute_id, game = opened.json()["dispute_id"], opened.json()["game"]
        r = service.post(
            f"/v1/disputes/{dispute_id}/answer",
            cheater,
            "dispute-answer",
            commitment(game, "island"),
        )
        assert r.status_code == 200, r.text
        for _ in range(12):  # beacon rounds pass while the auditor waits for the sybil
            time.sleep(0.3)
            service.tick()
        time.sleep(1.0)
    finally:
        stop.set()
        worker.join(timeout=30)
    view = service.client.get(f"/v1/disputes/{dispute_id}").json()
    assert not [f for k, f in events if k == "error"], events
    return str(view["game"]["outcome"] or view["game"]["stage"])


def test_control_the_same_auditor_answers_in_time_when_no_sybil_withholds(
    service: Service, tmp_path: Path, monkeypatch: Any
) -> None:
    """Control (passes): without the withholding sybil the auditor answers the game."""
    assert _play(service, tmp_path, monkeypatch, withholding_sybil=False) != "overturned"


def test_a_sybil_that_withholds_cannot_make_the_honest_auditor_miss_its_dispute_deadline(
    service: Service, tmp_path: Path, monkeypatch: Any
) -> None:
    outcome = _play(service, tmp_path, monkeypatch, withholding_sybil=True)
    assert outcome != "overturned", (
        "the honest auditor was kept waiting on the sybil's withheld checkpoint and lost the"
        f" cheater's game by silence: {outcome}"
    )
