"""The admission challenge on the real service: only a device that computes is admitted.

A run with ``admission.challenge`` on (the default) answers a join with a challenge whose seed is a
beacon round after the request. The island runs the workload with that seed on its
devices (the miner's code) and answers; a worker recomputes the reference (the
auditor's code) and the service admits on a match. A wrong answer and a late answer
are refused; neither reaches the roster.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import AdmissionAnswerAck
from hypertrain.auditor.admission import check_admissions
from hypertrain.miner.admission import challenge_hashes, memory_answers, one_challenge
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import AdmissionAnswer
from tests.challenge.conftest import Harness
from tests.challenge.helpers import DEVICE_CLASS, bearer, join_body, manifest_doc, signed

RUN = "run-c"
CPU = [torch.device("cpu")]


@pytest.fixture
def client(harness: Harness) -> ChallengeClient:
    doc = manifest_doc(RUN)
    doc["admission"] = {  # the challenge is on by default
        "delay_rounds": 1,
        "answer_window_rounds": 2,
        "workload_steps": 2,
    }
    r = harness.client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
    assert r.status_code == 200, r.text
    return ChallengeClient("http://testserver", worker_token="w" * 32, http=harness.client)


def _join(h: Harness, key: Hotkey, devices: int = 1) -> dict[str, Any]:
    r = h.client.post("/v1/join", json=signed(key, "join", join_body(devices=devices), run_id=RUN))
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def _roster(client: ChallengeClient) -> set[str]:
    return {r.hotkey for r in client.roster(RUN)}


def _answer(
    client: ChallengeClient, key: Hotkey, hashes: list[str], memory: list[list[str]] | None = None
) -> AdmissionAnswerAck:
    status = client.admission_status(RUN, key.ss58_address)
    if memory is None:  # the honest memory answers, one list per device of the join
        memory = memory_answers(status.seed or 0, status.memory_claims, CPU * len(hashes))
    body = AdmissionAnswer(seed_beacon_round=status.seed_beacon_round, hashes=hashes, memory=memory)
    env = seal(
        key, domain="admission-answer", run_id=RUN, body=body.model_dump(), expiry_round=50_000
    )
    return client.admission_answer(env)


def test_correct_answer_admits(harness: Harness, client: ChallengeClient) -> None:
    h, key = harness, harness.miners[0]
    joined = _join(h, key)
    now = h.beacon.round
    assert joined["admitted"] is False
    assert joined["challenge"]["seed_beacon_round"] == now + 1  # not public at the join
    assert client.admission_status(RUN, key.ss58_address).seed is None
    with pytest.raises(ServiceError) as early:
        _answer(client, key, ["ab" * 32])
    assert early.value.code == "no_seed"
    h.tick(1)
    # no worker has checked yet: the miner gives up waiting for the decision, not admitted
    answered = one_challenge(client, key, RUN, devices=CPU, poll_s=0.01, timeout_s=0.5).status
    assert answered.status == "answered" and key.ss58_address not in _roster(client)
    assert check_admissions(client, h.auditor, RUN, classes=frozenset({DEVICE_CLASS})) == []
    h.tick(1)  # the check's sample comes from the beacon round after the answer
    posted = check_admissions(client, h.auditor, RUN, classes=frozenset({DEVICE_CLASS}))
    assert [(p.admitted, p.hotkey) for p in posted] == [(True, key.ss58_address)]
    assert key.ss58_address in _roster(client)
    assert client.admission_status(RUN, key.ss58_address).status == "admitted"


def test_wrong_answer_is_refused(harness: Harness, client: ChallengeClient) -> None:
    h, key = harness, harness.miners[1]
    _join(h, key, devices=2)
    h.tick(1)
    seed = client.admission_status(RUN, key.ss58_address).seed
    right = challenge_hashes(seed, 2, CPU)[0]
    wrong = challenge_hashes(seed + 1, 2, CPU)[0]  # e.g. one device computing for two
    with pytest.raises(ServiceError) as short:
        _answer(client, key, [right], memory=[["00" * 16] * 16] * 2)
    assert short.value.code == "bad_body"
    _answer(client, key, [right, wrong])
    h.tick(1)
    posted = check_admissions(client, h.auditor, RUN, classes=frozenset({DEVICE_CLASS}))
    assert [(p.admitted, p.hotkey, p.first_round) for p in posted] == [
        (False, key.ss58_address, None)
    ]
    status = client.admission_status(RUN, key.ss58_address)
    assert status.status == "refused" and "devices [1]" in (status.reason or "")
    assert key.ss58_address not in _roster(client)


def test_late_answer_is_refused(harness: Harness, client: ChallengeClient) -> None:
    h, key = harness, harness.miners[2]
    joined = _join(h, key)
    h.tick(1 + 2 + 1)  # past seed round + answer window
    assert h.beacon.round > joined["challenge"]["answer_deadline_round"]
    seed = client.admission_status(RUN, key.ss58_address).seed
    with pytest.raises(ServiceError) as late:
        _answer(client, key, challenge_hashes(seed, 2, CPU))
    assert late.value.code == "late"
    assert client.admission_status(RUN, key.ss58_address).status == "refused"
    assert check_admissions(client, h.auditor, RUN, classes=frozenset({DEVICE_CLASS})) == []
    assert key.ss58_address not in _roster(client)
    # a refused island may ask again, after its backoff: a new challenge, a new seed round
    r = h.client.post("/v1/join", json=signed(key, "join", join_body(), run_id=RUN))
    assert (r.status_code, r.json()["error"]) == (409, "backoff")
    h.tick(h.state.settings.admission_backoff_rounds)
    again = _join(h, key)
    assert again["challenge"]["seed_beacon_round"] == h.beacon.round + 1


def test_the_miner_answering_late_is_refused(harness: Harness, client: ChallengeClient) -> None:
    """The miner's own answer, computed after the deadline: refused, and it says so."""
    h, key = harness, harness.miners[3]
    _join(h, key)
    h.tick(1 + 2 + 1)  # the island was busy past seed round + answer window
    outcome = one_challenge(client, key, RUN, devices=CPU, poll_s=0.01, timeout_s=5)
    assert outcome.late and outcome.status.status == "refused"
    assert key.ss58_address not in _roster(client)


def test_the_challenge_is_on_by_default() -> None:
    doc = manifest_doc(RUN)
    del doc["admission"]
    doc["coordinator"] = Hotkey.from_seed(b"\x01" * 32).ss58_address
    assert RunManifest.model_validate(doc).admission.challenge is True
