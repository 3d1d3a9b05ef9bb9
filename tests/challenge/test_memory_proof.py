"""The memory proof on the real service: a device holds the table it claims, or is refused.

The island answers with walks over a table the size of each device's claim (the miner's
code); a worker rebuilds the table and recomputes the (device, query) pairs that the
beacon round after the answer samples (the auditor's code). Answers computed from a
partial table, or one table answering for two devices, are refused; a check that does
not cover exactly the sample, or comes before the sample exists, changes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.auditor.admission import check_admissions, memory_checks
from hypertrain.miner.admission import challenge_hashes, memory_answers
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.memproof import (
    MIN_CLAIM_BYTES,
    QUERIES,
    QUERIES_CHECKED,
    check_sample,
    device_seed,
    table_shape,
)
from hypertrain.protocol.messages import AdmissionAnswer, AdmissionCheck
from hypertrain.trainer.memproof import build_table, device_answers, walk
from tests.challenge.conftest import Harness
from tests.challenge.helpers import DEVICE_CLASS, bearer, join_body, manifest_doc, signed

RUN = "run-m"
CPU = torch.device("cpu")
CLASSES = frozenset({DEVICE_CLASS})


@pytest.fixture
def client(harness: Harness) -> ChallengeClient:
    doc = manifest_doc(RUN)
    doc["admission"] = {"delay_rounds": 1, "answer_window_rounds": 2, "workload_steps": 2}
    r = harness.client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
    assert r.status_code == 200, r.text
    return ChallengeClient("http://testserver", worker_token="w" * 32, http=harness.client)


def _join_and_seed(h: Harness, key: Hotkey, devices: int = 1) -> int:
    body = join_body(devices=devices)
    r = h.client.post("/v1/join", json=signed(key, "join", body, run_id=RUN))
    assert r.status_code == 200 and r.json()["admitted"] is False, r.text
    h.tick(1)
    status = h.client.get(f"/v1/runs/{RUN}/admission/{key.ss58_address}").json()
    assert status["memory_claims"] == [MIN_CLAIM_BYTES] * devices
    seed: int = status["seed"]
    return seed


def _post_answer(client: ChallengeClient, key: Hotkey, seed: int, memory: list[list[str]]) -> None:
    status = client.admission_status(RUN, key.ss58_address)
    hashes = challenge_hashes(seed, status.workload_steps, [CPU] * len(memory))
    body = AdmissionAnswer(seed_beacon_round=status.seed_beacon_round, hashes=hashes, memory=memory)
    client.admission_answer(
        seal(
            key, domain="admission-answer", run_id=RUN, body=body.model_dump(), expiry_round=50_000
        )
    )


def _partial_table_answers(seed: int, skipped: float) -> list[str]:
    """A cheater that keeps only the first ``1 - skipped`` of the table and reads zeros
    for the rest (it built the whole table once, then gave up the memory)."""
    own = device_seed(seed, 0)
    flat = build_table(own, MIN_CLAIM_BYTES, CPU)
    kept = int(flat.numel() * (1 - skipped))
    flat[kept:] = 0
    return walk(flat, own, list(range(QUERIES)), table_shape(MIN_CLAIM_BYTES))


def _status(client: ChallengeClient, key: Hotkey) -> tuple[str, str]:
    status = client.admission_status(RUN, key.ss58_address)
    return status.status, status.reason or ""


def test_an_honest_claim_is_proven_and_recorded(harness: Harness, client: ChallengeClient) -> None:
    h, key = harness, harness.miners[0]
    seed = _join_and_seed(h, key)
    _post_answer(client, key, seed, memory_answers(seed, [MIN_CLAIM_BYTES], [CPU]))
    assert check_admissions(client, h.auditor, RUN, classes=CLASSES) == []  # no sample yet
    h.tick(1)
    posted = check_admissions(client, h.auditor, RUN, classes=CLASSES)
    assert [(p.admitted, p.hotkey) for p in posted] == [(True, key.ss58_address)]
    entry = next(r for r in client.roster(RUN) if r.hotkey == key.ss58_address)
    assert entry.proven_memory_bytes == table_shape(MIN_CLAIM_BYTES).proven_bytes


def test_an_answer_without_every_query_is_refused(
    harness: Harness, client: ChallengeClient
) -> None:
    h, key = harness, harness.miners[0]
    seed = _join_and_seed(h, key)
    short = memory_answers(seed, [MIN_CLAIM_BYTES], [CPU])[0][:-1]  # 15 of the 16 queries
    with pytest.raises(ServiceError) as bad:
        _post_answer(client, key, seed, [short])
    assert bad.value.code == "bad_body"
    assert _status(client, key)[0] == "pending"  # it may still answer in time


@pytest.mark.parametrize("skipped", [0.5, 0.05])
def test_answers_from_a_partial_table_are_refused(
    harness: Harness, client: ChallengeClient, skipped: float
) -> None:
    h, key = harness, harness.miners[1]
    seed = _join_and_seed(h, key)
    _post_answer(client, key, seed, [_partial_table_answers(seed, skipped)])
    h.tick(1)
    posted = check_admissions(client, h.auditor, RUN, classes=CLASSES)
    assert [(p.admitted, p.hotkey) for p in posted] == [(False, key.ss58_address)]
    status, reason = _status(client, key)  # the worker stopped at the first wrong answer
    assert status == "refused" and reason.startswith("memory_mismatch: device 0 query ")
    assert key.ss58_address not in {r.hotkey for r in client.roster(RUN)}


def test_one_table_answering_for_two_devices_is_refused(
    harness: Harness, client: ChallengeClient
) -> None:
    h, key = harness, harness.miners[2]
    seed = _join_and_seed(h, key, devices=2)
    one = device_answers(seed, 0, MIN_CLAIM_BYTES, CPU)
    _post_answer(client, key, seed, [one, one])
    h.tick(1)
    check_admissions(client, h.auditor, RUN, classes=CLASSES)
    assert _status(client, key)[1] == "memory_mismatch: device 1 query 0 differs from its table"


def test_a_check_must_cover_exactly_the_sample(harness: Harness, client: ChallengeClient) -> None:
    h, key = harness, harness.miners[3]
    seed = _join_and_seed(h, key)
    _post_answer(client, key, seed, memory_answers(seed, [MIN_CLAIM_BYTES], [CPU]))
    early = _check_body(client, key, seed, drop=0)
    with pytest.raises(ServiceError) as no_sample:  # before the sample's beacon round
        client.admission_check(_sealed(h.auditor, early))
    assert no_sample.value.code == "no_sample"
    h.tick(1)
    (item,) = client.admissions(RUN)
    randomness = h.beacon.get(h.beacon.round).randomness
    assert item.memory_sample == check_sample(randomness, key.ss58_address, 1)
    assert len(item.memory_sample) == QUERIES_CHECKED
    for drop in (1, 2):  # one pair missing; one pair sent twice instead
        with pytest.raises(ServiceError) as bad:
            client.admission_check(_sealed(h.auditor, _check_body(client, key, seed, drop=drop)))
        assert bad.value.code == "bad_sample"
    assert _status(client, key)[0] == "answered"  # nothing changed
    assert client.admission_check(_sealed(h.auditor, _check_body(client, key, seed))).admitted


def test_a_claim_below_the_layout_floor_is_refused(harness: Harness) -> None:
    doc = manifest_doc("run-big")
    doc["model"] = {**doc["model"], "vocab_size": 16384, "d_model": 64, "head_dim": 32}
    r = harness.client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
    assert r.status_code == 200, r.text
    body = join_body()  # claims 1 MiB; the float32 weights alone are 4 MiB
    r = harness.client.post("/v1/join", json=signed(harness.miners[0], "join", body, "run-big"))
    assert (r.status_code, r.json()["error"]) == (403, "insufficient_memory")
    body["devices"][0]["memory_bytes"] = 8 << 20
    r = harness.client.post("/v1/join", json=signed(harness.miners[0], "join", body, "run-big"))
    assert r.status_code == 200, r.text
    body["devices"][0]["memory_bytes"] = (1 << 40) + 1
    r = harness.client.post("/v1/join", json=signed(harness.miners[1], "join", body, "run-big"))
    assert r.status_code == 400  # past the largest claim a table can prove


def _check_body(client: ChallengeClient, key: Hotkey, seed: int, drop: int = -1) -> dict[str, Any]:
    """The worker's check; ``drop`` 0: no sample known yet (a guessed pair), 1: one pair
    missing, 2: a pair repeated in its place."""
    pending = [p for p in client.admissions(RUN) if p.hotkey == key.ss58_address]
    status = client.admission_status(RUN, key.ss58_address)
    reference = challenge_hashes(seed, status.workload_steps, [CPU])[0]
    if not pending:
        checks = [{"device": 0, "query": 0, "answer": "00" * 16}]
    else:
        checks = [m.model_dump() for m in memory_checks(pending[0], CPU)]
        if drop == 1:
            checks = checks[1:]
        elif drop == 2:
            checks = [checks[0], *checks[:-1]]
    body = {"hotkey": key.ss58_address, "seed_beacon_round": status.seed_beacon_round}
    return AdmissionCheck.model_validate(
        {**body, "reference_hash": reference, "memory": checks}
    ).model_dump()


def _sealed(worker: Hotkey, body: dict[str, Any]) -> Any:
    return seal(worker, domain="admission-check", run_id=RUN, body=body, expiry_round=50_000)
