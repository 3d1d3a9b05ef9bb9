"""Corrections never stop the chain: faults due at once are corrected in one pass, each
round citing its share, and a refused correction is retried with backoff while the next
rounds keep opening (against the real service, in process)."""

from __future__ import annotations

from pathlib import Path

from hypertrain.aggregator.corrections import Backoff
from hypertrain.aggregator.rebase import check_correction
from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import CorrectionAnswer
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.messages import MergeCorrection
from tests.aggregator.service_chain import (
    client_for,
    current_tape,
    prove,
    train,
    two_merged_rounds,
)
from tests.challenge.conftest import Harness


def _cited(client: ChallengeClient, index: int) -> list[tuple[int, str]]:
    """The faults the latest correction of round ``index`` cites."""
    env = client.round_detail("run-1", index).corrections[-1]
    return [(f.round, f.hotkey) for f in MergeCorrection.model_validate(env.body).faults]


def test_two_faults_due_at_once_are_both_corrected(harness: Harness, tmp_path: Path) -> None:
    h, agg, blobs, events = two_merged_rounds(harness, tmp_path)
    m = agg.service.manifest("run-1")
    one, two = h.miners[1].ss58_address, h.miners[2].ss58_address
    before = [current_tape(agg, blobs, w) for w in (0, 1)]
    prove(h, 0, one)
    prove(h, 1, two)
    assert [f.rollback_due for f in agg.service.proven_faults("run-1")] == [True, True]
    assert agg.step(m, open_rounds=True) == 0
    after = [current_tape(agg, blobs, w) for w in (0, 1)]
    assert one not in {i.hotkey for i in after[0].included}
    assert two not in {i.hotkey for i in after[1].included}
    assert one in {i.hotkey for i in after[1].included}  # its round-1 update is not faulty
    assert _cited(agg.service, 0) == [(0, one)]  # never a later round's fault
    assert _cited(agg.service, 1) == [(0, one), (1, two)]
    assert check_correction(before, {0: {one}, 1: {two}}, after, blobs) is None
    assert not any(f.rollback_due for f in agg.service.proven_faults("run-1"))
    assert not [e for e in events if e["event"] == "correction_refused"]


class RefusingClient(ChallengeClient):
    """The service's client, except that every correction is refused while ``refuse``."""

    refuse = True

    def post_correction(self, envelope: Envelope) -> CorrectionAnswer:
        if self.refuse:
            raise ServiceError(
                "POST /worker/v1/merge-correction: HTTP 409: the corrected tape does not start"
                " from its predecessor's current model", status=409, code="broken_chain",
            )  # fmt: skip
        return super().post_correction(envelope)


def test_a_refused_correction_does_not_stop_the_rounds(harness: Harness, tmp_path: Path) -> None:
    service = client_for(harness, RefusingClient)
    assert isinstance(service, RefusingClient)
    h, agg, blobs, events = two_merged_rounds(harness, tmp_path, service)
    m = agg.service.manifest("run-1")
    now = [0.0]
    agg.clock = lambda: now[0]
    faulty = h.miners[1].ss58_address
    prove(h, 0, faulty)
    train(h, agg, m, blobs, 2)  # refused, yet round 2 merges and round 3 opens
    train(h, agg, m, blobs, 3)  # in backoff: no try, round 4 opens
    refused = [e for e in events if e["event"] == "correction_refused"]
    assert [(e["status"], e["code"], e["retry_in_s"]) for e in refused] == [
        (409, "broken_chain", 2)
    ]
    assert "predecessor's current model" in refused[0]["detail"]
    assert [s.round for s in agg.service.rounds("run-1")] == [0, 1, 2, 3, 4]
    assert agg.service.proven_faults("run-1")[0].rollback_due
    now[0] = 10.0
    agg.step(m, open_rounds=True)  # refused again: the wait doubles
    assert [e["retry_in_s"] for e in events if e["event"] == "correction_refused"] == [2, 4]
    service.refuse = False
    now[0] = 20.0
    assert agg.step(m, open_rounds=True) == 0  # re-derived from the service, then accepted
    assert [e["rounds"] for e in events if e["event"] == "rolled_back"] == [[0, 1, 2, 3]]
    assert faulty not in {i.hotkey for i in current_tape(agg, blobs, 0).included}
    train(h, agg, m, blobs, 4)  # opened on the old model: merged, then relinked
    assert not agg.service.proven_faults("run-1")[0].rollback_due
    opened = agg.service.round_detail("run-1", 5).open.body
    assert opened["start_model_sha256"] == current_tape(agg, blobs, 4).new_model_sha256
    assert agg.retry == Backoff()  # a success resets the backoff


def test_the_backoff_doubles_up_to_its_cap() -> None:
    retry = Backoff(base_s=2.0, cap_s=10.0)
    assert retry.ready(0.0)
    assert [retry.refused(0.0) for _ in range(4)] == [2.0, 4.0, 8.0, 10.0]
    assert not retry.ready(9.0) and retry.ready(10.0)
    for _ in range(2000):  # a refusal that lasts for days never overflows
        retry.refused(0.0)
    retry.succeeded()
    assert retry.ready(0.0) and retry.refused(0.0) == 2.0
