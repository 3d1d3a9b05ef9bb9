"""The aggregator verifies every record through ``hypertrain.evidence`` (``records``).

Each case is a record the aggregator's former checks of its own accepted (they opened
the envelope and parsed the body, and skipped the signer where the coordinator was
empty) and evidence refuses: a commit with the wrong leaf count is now ``bad_commit``
(and the witness, which checks with the same functions, agrees), an island's own
verdict on itself and a verdict on an audit nobody assigned are refused (no verdict),
an assignment outside the round stops the collection, a round-open record another key
signed stops the merge (nothing is posted; the true record then merges), and a run whose
manifest names no coordinator is refused by the library, the poll loop and the command
line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hypertrain.aggregator import records
from hypertrain.aggregator.availability import updates_deadline
from hypertrain.aggregator.collect import collect
from hypertrain.aggregator.merge import MergeInputs, merge
from hypertrain.aggregator.runner import follow
from hypertrain.aggregator.witness import inputs_difference
from hypertrain.api.client import ChallengeClient
from hypertrain.api.models import RoundDetail, VerdictRecord
from hypertrain.challenge.state import ServiceState
from hypertrain.cli import main
from hypertrain.evidence.errors import CoordinatorError, VerificationError
from hypertrain.protocol.envelope import Envelope, seal
from hypertrain.protocol.identity import Hotkey, write_key_file
from hypertrain.protocol.messages import AuditAssignment
from tests.aggregator.test_attacks import KEYS, World, audited, unaudited
from tests.challenge.helpers import TOKENS, bearer

__all__ = ["audited", "unaudited"]  # the fixtures, shared with the attack tests
AUDITOR = Hotkey.from_seed(b"\x55" * 32)


def _sign(key: Hotkey, domain: str, body: dict[str, Any]) -> Envelope:
    return seal(key, domain=domain, run_id="run-1", body=body, expiry_round=50_000)


def _committed(w: World, count: int) -> RoundDetail:
    for i, key in enumerate(KEYS[:count]):
        w.commit(key, w.update(i + 1))
    w.tick(4)
    return w.agg.service.round_detail("run-1", 0)


def _match_all(w: World) -> RoundDetail:
    for a in w.agg.service.round_detail("run-1", 0).assignments:
        body = {"round": 0, "hotkey": a.body["hotkey"], "segments": a.body["segments"],
                "result": "match", "update_checked": True}  # fmt: skip
        r = w.client.post(
            "/worker/v1/verdict",
            headers=bearer("worker"),
            json=_sign(AUDITOR, "verdict", body).model_dump(),
        )
        assert r.status_code == 200, r.text
    return w.agg.service.round_detail("run-1", 0)


def test_a_commit_with_the_wrong_leaf_count_is_a_bad_commit_the_witness_agrees(
    unaudited: World,
) -> None:
    w = unaudited
    detail = _committed(w, 3)
    first = detail.commits[0]
    short = _sign(
        KEYS[0], "commit", {**first.body, "leaf_count": 2 + w.manifest.round.num_segments}
    )
    doctored = detail.model_copy(update={"commits": [short, *detail.commits[1:]]})
    got = collect(doctored, w.manifest, 0)
    (bad,) = got.excluded
    assert (bad.hotkey, bad.reason) == (KEYS[0].ss58_address, "bad_commit")
    assert "leaves" in bad.detail and len(got.candidates) == 2
    inputs = MergeInputs(w.manifest, 0, got.start_model_sha256, None, got.candidates,
                         got.excluded, proven=got.proven,
                         updates_by_round=updates_deadline(doctored))  # fmt: skip
    tape = merge(inputs, w.blobs).tape
    assert inputs_difference(tape, doctored, w.manifest, None) is None  # the same refusal
    found = inputs_difference(tape, detail, w.manifest, None)  # its real commit verifies
    assert found is not None and "bad_commit, but no commit" in found


def test_an_islands_own_verdict_on_its_audit_is_refused(audited: World) -> None:
    w = audited
    _committed(w, 2)
    detail = _match_all(w)
    assert len(collect(detail, w.manifest, 0).proven) == 2  # the auditor's verdicts prove both
    record = detail.verdicts[0]
    judged = {k.ss58_address: k for k in KEYS}[record.envelope.body["hotkey"]]
    own = VerdictRecord(verdict_id=record.verdict_id,
                        envelope=_sign(judged, "verdict", record.envelope.body))  # fmt: skip
    got = collect(
        detail.model_copy(update={"verdicts": [own, *detail.verdicts[1:]]}), w.manifest, 0
    )
    (refused,) = got.refused_verdicts
    assert "signed by that island itself" in refused.reason
    assert [(e.hotkey, e.reason) for e in got.excluded] == [(judged.ss58_address, "audit_pending")]
    assert judged.ss58_address not in got.proven


def test_a_verdict_on_an_unassigned_audit_is_refused_not_a_mismatch(unaudited: World) -> None:
    w = unaudited
    detail = _committed(w, 2)
    assert not detail.assignments
    body = {"round": 0, "hotkey": KEYS[0].ss58_address, "segments": [0], "result": "mismatch",
            "first_bad_leaf": 1}  # fmt: skip
    stray = VerdictRecord(verdict_id="ab" * 32, envelope=_sign(AUDITOR, "verdict", body))
    got = collect(detail.model_copy(update={"verdicts": [stray]}), w.manifest, 0)
    (refused,) = got.refused_verdicts
    assert refused.verdict_id == "ab" * 32 and "not assigned" in refused.reason
    assert not got.excluded and len(got.candidates) == 2  # never audit_mismatch


def test_an_assignment_outside_the_round_stops_the_collection(audited: World) -> None:
    w = audited
    detail = _committed(w, 1)
    state: ServiceState = w.client.app.state.service  # type: ignore[attr-defined]
    (a,) = detail.assignments
    wide = AuditAssignment.model_validate({**a.body, "segments": [w.manifest.round.num_segments]})
    forged = state.sign("run-1", "audit-assignment", wide)  # the coordinator's own key
    with pytest.raises(VerificationError, match="outside the round"):
        collect(detail.model_copy(update={"assignments": [forged]}), w.manifest, 0)


def test_a_run_without_a_coordinator_is_refused(unaudited: World) -> None:
    w = unaudited
    detail = _committed(w, 1)
    nobody = w.manifest.model_copy(update={"coordinator": ""})
    with pytest.raises(CoordinatorError, match="names no coordinator"):
        collect(detail, nobody, 0)
    with pytest.raises(CoordinatorError):
        w.agg.step(nobody, open_rounds=True)
    assert records.round_open(detail, w.manifest, 0).round == 0  # the named one verifies


class ForgedOpen(ChallengeClient):
    """The service's client, serving every round-open record re-signed by another key."""

    def round_detail(self, run_id: str, index: int) -> RoundDetail:
        detail = super().round_detail(run_id, index)
        return detail.model_copy(update={"open": _sign(AUDITOR, "round-open", detail.open.body)})


def test_a_forged_open_record_stops_the_merge_and_loses_nothing(unaudited: World) -> None:
    w = unaudited
    _committed(w, 2)
    w.tick(2)  # the audit window closed: the merge phase
    honest = w.agg.service
    w.agg.service = ForgedOpen("http://testserver", worker_token=TOKENS["worker"],
                               admin_token=TOKENS["admin"], http=w.client)  # fmt: skip
    with pytest.raises(VerificationError, match="signed by"):
        w.agg.step(w.manifest, open_rounds=True)
    (summary,) = honest.rounds("run-1")  # nothing merged, nothing opened on it
    assert summary.phase == "merge" and honest.round_detail("run-1", 0).merge is None
    w.agg.service = honest  # the true record: the same round merges as it would have
    assert w.agg.step(w.manifest, open_rounds=False) == 1
    assert honest.rounds("run-1")[0].phase == "settle"


class Coordinatorless(ChallengeClient):
    """The service's client, serving a manifest that names no coordinator."""

    def manifest_envelope(self, run_id: str) -> dict[str, Any]:
        doc = super().manifest_envelope(run_id)
        manifest: dict[str, Any] = doc["body"]["manifest"]  # type: ignore[call-overload, index, assignment]
        body = {"manifest": {**manifest, "coordinator": ""}}
        return _sign(AUDITOR, "manifest", body).model_dump()


def test_the_poll_loop_refuses_a_run_without_a_coordinator(unaudited: World) -> None:
    w = unaudited
    w.agg.service = Coordinatorless("http://testserver", http=w.client)
    with pytest.raises(CoordinatorError, match="none is pinned"):
        follow(w.agg, open_rounds=False, poll_s=0, stop=lambda: False)


def test_the_command_refuses_a_run_without_a_coordinator(
    unaudited: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    served = Coordinatorless("http://testserver", http=unaudited.client).manifest_envelope("run-1")
    monkeypatch.setattr(ChallengeClient, "manifest_envelope", lambda self, run_id: served)
    key = tmp_path / "agg.key"
    write_key_file(b"\x66" * 32, key)
    argv = ["aggregator", "merge", "--service-url", "http://127.0.0.1:9", "--relay-url",
            "http://127.0.0.1:9", "--run-id", "run-1", "--key-file", str(key), "--round", "0",
            "--state-dir", str(tmp_path / "state")]  # fmt: skip
    assert main(argv) == 1
    assert "names no coordinator and none is pinned" in capsys.readouterr().err
