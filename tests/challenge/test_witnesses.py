"""Tape witnesses on the real service: signed attestations hold or release settlement.

With ``HYPERTRAIN_TAPE_WITNESSES`` = 1 a merged round settles only once a witness key
(registered, holding no other role in the run) attested that its recomputation of the
round's current tape agrees; no attestation holds it, a disagreement holds it as
contested and shows the differing field in the round's public view. The tapes here are
signed records only (no blobs): the recomputation itself runs in
``tests/aggregator/test_witness.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hypertrain.challenge.errors import MissingRecordError
from hypertrain.challenge.rounds import chain
from hypertrain.challenge.settlement import witness
from hypertrain.challenge.store import merge_storage
from hypertrain.challenge.store.merge_storage import ProvenFaultRow
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.sqlite import transaction
from tests.challenge.dispute_scenario import (
    AUDITOR,
    DIFF,
    ISLANDS,
    RUN,
    SECOND,
    TAPE_SIGNER,
    WITNESS,
    WITNESS_WAIT,
    Service,
    attest,
    merged,
    running,
    witnessed_run,
)
from tests.challenge.helpers import bearer, signed

UNREGISTERED = Hotkey.from_seed(b"\x73" * 32)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    with witnessed_run(tmp_path, 1) as svc:
        yield svc


@pytest.fixture
def unwitnessed(tmp_path: Path) -> Iterator[Service]:
    with witnessed_run(tmp_path, 0) as svc:
        yield svc


def _view(svc: Service) -> dict[str, Any]:
    detail = svc.client.get(f"/v1/runs/{RUN}/rounds/0").json()
    assert detail["witnesses"] == svc.client.get(f"/v1/runs/{RUN}/rounds/0/witnesses").json()
    return dict(detail["witnesses"]) | {"phase": detail["phase"]}


def test_an_agreeing_witness_settles_the_round(service: Service) -> None:
    tape = merged(service)
    answer = attest(service, WITNESS, tape)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "witnessed"
    service.tick(30)
    assert set(service.ledger.settled[(RUN, 0)]) == {k.ss58_address for k in ISLANDS}
    view = _view(service)
    assert (view["phase"], view["status"], view["agreeing"]) == (
        "final", "witnessed", [WITNESS.ss58_address]
    )  # fmt: skip


def test_no_witness_holds_the_round_unsettled(service: Service) -> None:
    merged(service)
    service.tick(30)  # the dispute window is long over
    assert (RUN, 0) not in service.ledger.settled  # nothing escrowed, minted or paid
    view = _view(service)
    assert (view["phase"], view["status"], view["required"]) == ("settle", "awaiting", 1)


def test_a_disagreeing_witness_holds_the_round_as_contested_and_shows_why(
    service: Service,
) -> None:
    tape = merged(service)
    assert attest(service, WITNESS, tape).status_code == 200  # one agrees ...
    answer = attest(service, SECOND, tape, DIFF)  # ... one disagrees: fail closed
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "contested"
    service.tick(30)
    assert (RUN, 0) not in service.ledger.settled
    view = _view(service)
    assert (view["phase"], view["status"], view["first_difference"]) == (
        "settle", "contested", DIFF
    )  # fmt: skip
    assert view["disagreeing"] == [SECOND.ss58_address]
    assert [(a["witness"], a["agrees"], a["counted"]) for a in view["attestations"]] == [
        (WITNESS.ss58_address, True, True), (SECOND.ss58_address, False, True)
    ]  # fmt: skip


def test_without_a_requirement_rounds_settle_as_before(unwitnessed: Service) -> None:
    tape = merged(unwitnessed)
    assert attest(unwitnessed, SECOND, tape, DIFF).status_code == 200  # recorded, visible
    unwitnessed.tick(30)
    assert set(unwitnessed.ledger.settled[(RUN, 0)]) == {k.ss58_address for k in ISLANDS}
    view = _view(unwitnessed)
    assert (view["status"], view["first_difference"]) == ("not_required", None)


@pytest.mark.parametrize(
    ("who", "why"),
    [
        pytest.param(TAPE_SIGNER, "signs the merge tapes", id="the-aggregator"),
        pytest.param(AUDITOR, "signed verdicts", id="an-auditor"),
        pytest.param(ISLANDS[0], "is an island", id="an-island"),
    ],
)
def test_a_key_with_another_role_cannot_attest(service: Service, who: Hotkey, why: str) -> None:
    tape = merged(service)
    answer = attest(service, who, tape)
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"] == "role_conflict" and why in answer.json()["detail"]
    service.tick(30)
    assert (RUN, 0) not in service.ledger.settled
    assert _view(service)["attestations"] == []


def test_attestation_refusals_are_typed_and_change_nothing(service: Service) -> None:
    tape = merged(service)
    cases = [
        (attest(service, UNREGISTERED, tape), 403, "unregistered"),
        (attest(service, WITNESS, "ee" * 32), 409, "superseded"),  # not the round's tape
    ]
    assert attest(service, WITNESS, tape).status_code == 200
    cases.append((attest(service, WITNESS, tape, DIFF), 409, "duplicate"))  # one word a tape
    for answer, status, code in cases:
        assert (answer.status_code, answer.json()["error"]) == (status, code), answer.text
    bad = {"round": 0, "tape_sha256": tape, "agrees": False}  # a disagreement names its field
    assert service.post("/v1/tape-attestation", SECOND, "tape-attestation", bad).status_code == 400
    assert [a["witness"] for a in _view(service)["attestations"]] == [WITNESS.ss58_address]


def test_a_witness_key_signs_no_verdict_or_tape(service: Service) -> None:
    tape = merged(service)
    assert attest(service, WITNESS, tape).status_code == 200
    assigned = service.client.get(
        f"/worker/v1/runs/{RUN}/rounds/0/assignments", headers=bearer("worker")
    ).json()
    body = {**assigned[0]["body"], "result": "match", "update_checked": True}
    body.pop("selection_beacon_round")
    r = service.client.post(
        "/worker/v1/verdict", headers=bearer("worker"), json=signed(WITNESS, "verdict", body, RUN)
    )
    assert (r.status_code, r.json()["error"]) == (403, "role_conflict"), r.text


def test_a_lying_witness_dropped_from_the_list_releases_its_contest(
    service: Service,
) -> None:
    """The operator checks the named field with ``verify-tape`` and finds the witness
    lied: restarted without its key on ``HYPERTRAIN_WITNESS_HOTKEYS``, its word stays in
    the record but no longer counts, and the round settles on the agreeing one."""
    tape = merged(service)
    assert attest(service, SECOND, tape, DIFF).status_code == 200
    assert attest(service, WITNESS, tape).status_code == 200
    service.tick(30)
    assert (RUN, 0) not in service.ledger.settled
    service.client.__exit__(None, None, None)
    service.settings = dataclasses.replace(
        service.settings, witness_hotkeys=frozenset({WITNESS.ss58_address})
    )
    with running(service):
        service.tick(1)
        assert set(service.ledger.settled[(RUN, 0)]) == {k.ss58_address for k in ISLANDS}
        view = _view(service)
        assert (view["status"], view["phase"]) == ("witnessed", "final")
        assert [a["counted"] for a in view["attestations"]] == [False, True]
        off = attest(service, SECOND, tape)
        assert off.status_code == 403 and "HYPERTRAIN_WITNESS_HOTKEYS" in off.json()["detail"]


def _open_next(svc: Service, start: str | None = None) -> Any:
    """Ask the service to open round 1 (on the chain's model, or on ``start``)."""
    body = {} if start is None else {"start_model_sha256": start, "start_model_url": "http://x"}
    return svc.client.post(f"/admin/v1/runs/{RUN}/rounds", headers=bearer("admin"), json=body)


def _opened_on(answer: Any) -> str:
    assert answer.status_code == 200, answer.text
    return str(answer.json()["body"]["start_model_sha256"])


def test_the_next_round_opens_on_a_merged_model_only_once_it_is_witnessed(
    service: Service,
) -> None:
    tape = merged(service)
    waiting = _open_next(service)  # nobody has recomputed round 0 yet: no island trains on it
    assert (waiting.status_code, waiting.json()["error"]) == (409, "unwitnessed"), waiting.text
    assert attest(service, WITNESS, tape).status_code == 200
    assert _opened_on(_open_next(service)) == "bb" * 32  # the witnessed model


def test_a_silent_witness_delays_the_next_round_by_the_wait_at_most(service: Service) -> None:
    """Nobody attests: after the wait the next round opens on round 0's own start model
    (its merge left out of the chain), and round 0 stays unpaid until witnessed."""
    merged(service)
    service.tick(WITNESS_WAIT)
    assert _open_next(service).json()["error"] == "unwitnessed"
    service.tick(1)
    assert _opened_on(_open_next(service)) == "aa" * 32
    assert (RUN, 0) not in service.ledger.settled


def test_a_contested_tape_never_becomes_the_next_start_model(service: Service) -> None:
    """A contest holds the next round like silence does; the operator cannot name the
    contested model instead, and after the wait the round opens on the last cleared one."""
    tape = merged(service)
    assert attest(service, WITNESS, tape, DIFF).status_code == 200
    assert _open_next(service).json()["error"] == "unwitnessed"
    service.tick(WITNESS_WAIT + 1)
    forced = _open_next(service, "bb" * 32)  # the contested tape's model
    assert (forced.status_code, forced.json()["error"]) == (400, "unwitnessed_model"), forced.text
    assert _opened_on(_open_next(service, "aa" * 32)) == "aa" * 32


def test_a_round_without_a_tape_has_no_witness_wait(service: Service) -> None:
    """The witness wait counts from the tape's arrival: before a tape arrives asking for
    its end is a typed failure (never a wait counted from beacon round 0), and the next
    round's chain step reads the missing tape as such (it opens on round 0's start model)."""
    state = service.client.app.state.service  # type: ignore[attr-defined]
    with state.lock:
        with pytest.raises(MissingRecordError, match="no merge tape") as refused:
            witness.wait_until(state.conn, state.settings, RUN, 0)
        assert refused.value.code == "no_tape"
        assert chain.step(state, RUN, 0, state.due_round()) == "skip"
    merged(service)  # arrives at the current beacon round
    with state.lock:
        assert witness.wait_until(state.conn, state.settings, RUN, 0) == (
            state.due_round() + WITNESS_WAIT
        )


def test_without_witnesses_the_next_round_opens_on_the_tape_at_once(unwitnessed: Service) -> None:
    merged(unwitnessed)
    assert _opened_on(_open_next(unwitnessed)) == "bb" * 32


def _correct(
    svc: Service, tape: str, faults: list[dict[str, Any]], new: str = "ee", drop: str = ""
) -> Any:
    """The aggregator's signed correction of round 0 superseding ``tape`` (its tape
    ``new * 32``, without ``drop``'s update)."""
    corrected = {
        "round": 0, "start_model_sha256": "aa" * 32, "new_model_sha256": "ef" * 32,
        "new_model_url": "http://relay/m1b", "outer_state_sha256": "cd" * 32,
        "tape_sha256": new * 32, "excluded": {},
        "included": sorted(k.ss58_address for k in ISLANDS if k.ss58_address != drop),
    }  # fmt: skip
    body = {"supersedes_tape_sha256": tape, "faults": faults, "tape": corrected}
    return svc.client.post(
        "/worker/v1/merge-correction", headers=bearer("worker"),
        json=signed(TAPE_SIGNER, "merge-correction", body, RUN),
    )  # fmt: skip


def test_a_contested_tape_is_resolved_by_a_correction_witnessed_afresh(service: Service) -> None:
    """Without a contest a correction must answer a proven fault; once a witness
    contests the tape, a corrected tape supersedes it, and the round settles on the
    corrected tape when the witnesses agree with it, never on the contested one."""
    tape = merged(service)
    early = _correct(service, tape, [])
    assert (early.status_code, early.json()["error"]) == (403, "fault_not_proven"), early.text
    assert attest(service, WITNESS, tape, DIFF).status_code == 200
    service.tick(30)
    assert (RUN, 0) not in service.ledger.settled  # contested: held
    answer = _correct(service, tape, [])
    assert answer.status_code == 200, answer.text
    assert _view(service)["status"] == "awaiting"  # the corrected tape waits for its witnesses
    agreed = attest(service, WITNESS, "ee" * 32)
    assert agreed.status_code == 200 and agreed.json()["status"] == "witnessed", agreed.text
    service.tick(1)
    assert set(service.ledger.settled[(RUN, 0)]) == {k.ss58_address for k in ISLANDS}
    assert _opened_on(_open_next(service)) == "ef" * 32  # the chain continues on it


def test_only_a_correction_citing_a_new_fault_restarts_the_wait(service: Service) -> None:
    """A correction answering a proven fault arrives after the first tape's wait: the next
    round waits for its witnesses afresh. A later correction citing the same fault again
    (here answering a contest) does not restart the wait, so corrections cannot hold
    the next round open for ever: past the wait it opens on the model round 0 continues."""
    tape = merged(service)
    faulty = ISLANDS[0].ss58_address
    state = service.client.app.state.service  # type: ignore[attr-defined]
    with state.lock, transaction(state.conn):  # the proof's row (the round is not final)
        merge_storage.add_proven_fault(state.conn, RUN, ProvenFaultRow(0, faulty, "late", 1))
    service.tick(WITNESS_WAIT + 1)  # the first tape's wait is over
    fault = [{"round": 0, "hotkey": faulty}]
    assert _correct(service, tape, fault, drop=faulty).status_code == 200
    assert _open_next(service).json()["error"] == "unwitnessed"  # the wait restarted
    service.tick(10)
    assert attest(service, WITNESS, "ee" * 32, DIFF).status_code == 200
    again = _correct(service, "ee" * 32, fault, new="ff", drop=faulty)
    assert again.status_code == 200, again.text
    service.tick(WITNESS_WAIT - 9)  # past the first correction's wait, inside the second's
    assert _opened_on(_open_next(service)) == "aa" * 32
