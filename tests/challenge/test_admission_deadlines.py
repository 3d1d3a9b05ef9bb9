"""Admission deadlines per device class, and budgets on proven memory, on the real service.

The service's deadline table (service settings, not the manifest) gives each declared
device class its own answer deadline, sized by the memory it claims; an unknown class
gets the strictest. An island answering inside its class's deadline is admitted, one
answering after it is refused with the typed reason ``late``. The layout (the island's
budget) is admitted on the bytes the claim's table proves, never on the declared claim.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.auditor.admission import check_admissions
from hypertrain.challenge.app import create_app
from hypertrain.challenge.deadlines import (
    DEFAULT_DEADLINES,
    GIB,
    ClassDeadline,
    DeadlineTable,
    load_deadlines,
)
from hypertrain.challenge.errors import SettingsError
from hypertrain.challenge.settings import settings_from_env
from hypertrain.miner.admission import challenge_hashes, device_class, memory_answers
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.memproof import claim_for, table_shape
from hypertrain.protocol.messages import AdmissionAnswer
from tests.challenge.conftest import Harness
from tests.challenge.helpers import (
    FakeLedger,
    SteppedBeacon,
    bearer,
    join_body,
    make_settings,
    manifest_doc,
    signed,
)

RUN = "run-d"
CPU = [torch.device("cpu")]
# at the stepped beacon's 3 s a round: slow gets 10 rounds, fast 1 (the strictest)
TABLE = DeadlineTable(
    rules=(
        ClassDeadline(prefix="slow:", tier="slow", overhead_s=30.0, s_per_gib=0.0),
        ClassDeadline(prefix="fast:", tier="fast", overhead_s=3.0, s_per_gib=0.0),
    )
)
WINDOW = 20  # the manifest's outer bound, longer than every rule


@pytest.fixture
def harness(tmp_path: Path, miner_keys: list[Hotkey]) -> Iterator[Harness]:
    settings = make_settings(
        tmp_path, [k.ss58_address for k in miner_keys], admission_deadlines=TABLE
    )
    beacon, ledger = SteppedBeacon(), FakeLedger()
    with TestClient(create_app(settings, beacon=beacon, ledger=ledger)) as client:
        doc = manifest_doc(RUN)
        doc["admission"] = {
            "delay_rounds": 1,
            "answer_window_rounds": WINDOW,
            "workload_steps": 2,
        }
        r = client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
        assert r.status_code == 200, r.text
        auditor, outsider = Hotkey.from_seed(b"\x55" * 32), Hotkey.from_seed(b"\x77" * 32)
        yield Harness(client, beacon, ledger, miner_keys, outsider, auditor, tmp_path)


@pytest.fixture
def client(harness: Harness) -> ChallengeClient:
    return ChallengeClient("http://testserver", worker_token="w" * 32, http=harness.client)


def _join(h: Harness, key: Hotkey, device_class: str, memory: int = 1 << 20) -> dict[str, Any]:
    body = join_body()
    for device in body["devices"]:
        device["device_class"], device["memory_bytes"] = device_class, memory
    r = h.client.post("/v1/join", json=signed(key, "join", body, run_id=RUN))
    assert r.status_code == 200, r.text
    challenge: dict[str, Any] = r.json()["challenge"]
    return challenge


def _answer(client: ChallengeClient, key: Hotkey) -> None:
    status = client.admission_status(RUN, key.ss58_address)
    seed = status.seed or 0
    body = AdmissionAnswer(
        seed_beacon_round=status.seed_beacon_round,
        hashes=challenge_hashes(seed, 2, CPU),
        memory=memory_answers(seed, status.memory_claims, CPU),
    )
    env = seal(
        key, domain="admission-answer", run_id=RUN, body=body.model_dump(), expiry_round=50_000
    )
    client.admission_answer(env)


def _check(h: Harness, client: ChallengeClient, device_class: str) -> list[bool]:
    posted = check_admissions(client, h.auditor, RUN, classes=frozenset({device_class}))
    return [p.admitted for p in posted]


def test_an_answer_inside_its_class_deadline_is_admitted(
    harness: Harness, client: ChallengeClient
) -> None:
    h, key = harness, harness.miners[0]
    challenge = _join(h, key, "slow:box")
    seed_round = challenge["seed_beacon_round"]
    assert challenge["answer_deadline_round"] == seed_round + 10  # 30 s at 3 s a round
    assert challenge["deadline_tier"] == "slow"
    h.tick(1 + 9)  # the seed round, then 9 of the class's 10 rounds
    _answer(client, key)
    h.tick(1)  # the sample's beacon round
    assert _check(h, client, "slow:box") == [True]
    roster = {r.hotkey: r for r in client.roster(RUN)}
    assert roster[key.ss58_address].proven_memory_bytes == 1 << 20


def test_an_answer_after_its_class_deadline_is_refused(
    harness: Harness, client: ChallengeClient
) -> None:
    h, key = harness, harness.miners[1]
    challenge = _join(h, key, "fast:box")
    assert challenge["answer_deadline_round"] == challenge["seed_beacon_round"] + 1
    h.tick(1 + 2)  # inside the manifest's window, past the class's deadline
    with pytest.raises(ServiceError) as late:
        _answer(client, key)
    assert late.value.code == "late"
    status = client.admission_status(RUN, key.ss58_address)
    assert status.status == "refused" and "'fast:box'" in (status.reason or "")
    assert _check(h, client, "fast:box") == []
    assert key.ss58_address not in {r.hotkey for r in client.roster(RUN)}


def test_an_unknown_class_gets_the_strictest_deadline(
    harness: Harness, client: ChallengeClient
) -> None:
    h, key = harness, harness.miners[2]
    challenge = _join(h, key, "made-up:box")
    assert challenge["answer_deadline_round"] == challenge["seed_beacon_round"] + 1
    assert challenge["deadline_tier"] == "fast"
    h.tick(1 + 2)
    with pytest.raises(ServiceError) as late:
        _answer(client, key)
    assert late.value.code == "late"


def test_a_claim_larger_than_its_proof_is_not_the_budget(
    harness: Harness, client: ChallengeClient
) -> None:
    """The roster keeps what the table proved (whole rows), not the declared claim."""
    h, key = harness, harness.miners[3]
    claim = (1 << 20) + 4000  # not a whole number of rows
    _join(h, key, "slow:box", memory=claim)
    h.tick(1)
    _answer(client, key)
    h.tick(1)
    assert _check(h, client, "slow:box") == [True]
    roster = {r.hotkey: r for r in client.roster(RUN)}
    assert roster[key.ss58_address].proven_memory_bytes == table_shape(claim).proven_bytes
    assert table_shape(claim).proven_bytes == 1 << 20 < claim


def test_a_layout_is_admitted_on_the_proven_bytes(harness: Harness) -> None:
    """A claim at the floor whose table proves less than the floor is refused at the join;
    the miner's claim (whole MiB that prove the floor) is accepted."""
    h, key = harness, harness.miners[0]
    doc = manifest_doc("run-big")
    doc["model"]["vocab_size"] = 278_238  # a floor just under 17 MiB, above what 17 MiB proves
    doc["admission"] = {"answer_window_rounds": WINDOW}
    r = h.client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
    assert r.status_code == 200, r.text
    floor = 17_817_664
    assert table_shape(17 << 20).proven_bytes < floor <= 17 << 20

    def join(memory: int) -> Any:
        body = join_body()
        body["devices"][0]["memory_bytes"] = memory
        return h.client.post("/v1/join", json=signed(key, "join", body, run_id="run-big"))

    refused = join(17 << 20)
    assert refused.status_code == 403 and refused.json()["error"] == "insufficient_memory"
    assert claim_for(floor) == 18 << 20
    assert join(claim_for(floor)).status_code == 200


def test_the_table_matches_the_longest_prefix_and_sizes_by_the_largest_claim() -> None:
    table = DEFAULT_DEADLINES
    h200 = table.deadline("cuda:NVIDIA-H200", [GIB, 80 * GIB], period_s=3)
    assert (h200.tier, h200.known, h200.seconds, h200.rounds) == ("datacenter-gpu", True, 90, 30)
    consumer = table.deadline("cuda:NVIDIA-GeForce-RTX-4090", [24 * GIB], period_s=3)
    assert (consumer.tier, consumer.seconds) == ("consumer-gpu", 10 + 4 * 24)
    local = device_class(torch.device("cpu"))  # this machine's class, whatever its CPU
    cpu = table.deadline(local, [1 << 20], period_s=3)
    assert cpu.tier == "cpu" and cpu.rounds == 4  # 10.16 s: 4 rounds of 3 s
    unknown = table.deadline("tpu:v5", [8 * GIB], period_s=3)
    assert (unknown.tier, unknown.known) == ("datacenter-gpu", False)
    assert unknown.seconds == min(r.seconds(8 * GIB) for r in table.rules)


def test_a_deadline_file_is_read_and_a_bad_one_refused(tmp_path: Path) -> None:
    good = tmp_path / "deadlines.json"
    rule = {"prefix": "cpu:", "tier": "cpu", "overhead_s": 5, "s_per_gib": 100}
    good.write_text(json.dumps({"rules": [rule]}))
    assert load_deadlines(good).rules == (ClassDeadline("cpu:", "cpu", 5.0, 100.0),)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rules": [{**rule, "overhead_s": 0}]}))
    with pytest.raises(ValueError, match="overhead_s"):
        load_deadlines(bad)
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps({"rules": [rule, rule]}))
    with pytest.raises(ValueError, match="repeat"):
        load_deadlines(twice)


def test_the_service_reads_its_deadline_file(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, [])
    env = {
        "CHALLENGE_STATE_DIR": str(tmp_path / "state"),
        "CHALLENGE_INTERNAL_TOKEN_FILE": str(tmp_path / "secrets" / "internal.token"),
        "HYPERTRAIN_COORD_KEY_FILE": str(tmp_path / "secrets" / "coord.key"),
        "HYPERTRAIN_METAGRAPH_SOURCE": "file",
        "HYPERTRAIN_METAGRAPH_FILE": str(settings.metagraph_file),
        "HYPERTRAIN_ADMISSION_DEADLINES_FILE": str(tmp_path / "missing.json"),
    }
    with pytest.raises(SettingsError, match="HYPERTRAIN_ADMISSION_DEADLINES_FILE"):
        settings_from_env(env)
    (tmp_path / "d.json").write_text(
        json.dumps({"rules": [{"prefix": "x", "tier": "x", "overhead_s": 1, "s_per_gib": 0}]})
    )
    env["HYPERTRAIN_ADMISSION_DEADLINES_FILE"] = str(tmp_path / "d.json")
    assert settings_from_env(env).admission_deadlines.rules[0].tier == "x"
    del env["HYPERTRAIN_ADMISSION_DEADLINES_FILE"]
    assert settings_from_env(env).admission_deadlines == DEFAULT_DEADLINES
