"""What an admission check may cost the worker, on the real service and the worker's code.

The worker's cost is bounded before the island has paid anything: a claim above its
class's cap is refused at the join; the worker checks the cheapest challenges first and
starts none once its pass budget is spent; a check over its budget, or one that raises
on the island's bytes, refuses only that island (typed); and every refusal doubles the
rounds before the hotkey may join again.
"""

from __future__ import annotations

import pytest
import torch

from hypertrain.api.client import ChallengeClient
from hypertrain.api.models import PendingAdmission
from hypertrain.auditor.admission import CheckWork, check_admissions, check_cost
from hypertrain.auditor.admission import _one as one_check
from hypertrain.challenge.deadlines import DEFAULT_DEADLINES, GIB
from hypertrain.miner.admission import challenge_hashes, memory_answers
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.memproof import table_shape
from hypertrain.protocol.messages import AdmissionAnswer
from tests.challenge.conftest import Harness
from tests.challenge.helpers import DEVICE_CLASS, bearer, join_body, manifest_doc, signed

RUN = "run-cost"
CPU = torch.device("cpu")
CLASSES = frozenset({DEVICE_CLASS})
BIG = 4 << 30  # a claim the worker never builds in these tests


@pytest.fixture
def client(harness: Harness) -> ChallengeClient:
    doc = manifest_doc(RUN)
    doc["admission"] = {"delay_rounds": 1, "answer_window_rounds": 2, "workload_steps": 2}
    r = harness.client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
    assert r.status_code == 200, r.text
    return ChallengeClient("http://testserver", worker_token="w" * 32, http=harness.client)


def _join(h: Harness, key: Hotkey, claim: int, device_class: str = DEVICE_CLASS) -> str:
    body = join_body()
    body["devices"][0]["memory_bytes"] = claim
    body["devices"][0]["device_class"] = device_class
    r = h.client.post("/v1/join", json=signed(key, "join", body, run_id=RUN))
    return "challenged" if r.status_code == 200 else str(r.json()["error"])


def _answer(client: ChallengeClient, key: Hotkey, honest: bool) -> None:
    status = client.admission_status(RUN, key.ss58_address)
    assert status.seed is not None
    hashes = challenge_hashes(status.seed, status.workload_steps, [CPU])
    memory = (
        memory_answers(status.seed, status.memory_claims, [CPU]) if honest else [["00" * 16] * 16]
    )
    body = AdmissionAnswer(seed_beacon_round=status.seed_beacon_round, hashes=hashes, memory=memory)
    client.admission_answer(
        seal(
            key, domain="admission-answer", run_id=RUN, body=body.model_dump(), expiry_round=50_000
        )
    )


def _two_answered(h: Harness, client: ChallengeClient) -> tuple[Hotkey, Hotkey]:
    """A big claim answered with zeros (listed first) and an honest 1 MiB join, sampled."""
    big, honest = h.miners[0], h.miners[1]
    assert _join(h, big, BIG) == _join(h, honest, 1 << 20) == "challenged"
    h.tick(1)
    _answer(client, big, honest=False)
    _answer(client, honest, honest=True)
    h.tick(1)
    return big, honest


def _status(client: ChallengeClient, key: Hotkey) -> tuple[str, str]:
    s = client.admission_status(RUN, key.ss58_address)
    return s.status, s.reason


def test_a_claim_above_its_class_cap_is_refused_at_the_join(
    harness: Harness, client: ChallengeClient
) -> None:
    h = harness
    cpu_cap = DEFAULT_DEADLINES.max_claim_bytes("cpu:anything")
    assert cpu_cap == 64 * GIB
    assert _join(h, h.miners[0], cpu_cap + (1 << 20)) == "claim_too_large"
    # a class no rule names gets the smallest cap of any rule (32 GiB), not the largest
    assert DEFAULT_DEADLINES.max_claim_bytes("tpu:invented") == 32 * GIB
    assert _join(h, h.miners[1], 33 * GIB, device_class="tpu:invented") == "claim_too_large"
    assert _join(h, h.miners[2], 32 * GIB, device_class="tpu:invented") == "challenged"


def test_a_big_claim_waits_for_a_later_pass_behind_an_honest_join(
    harness: Harness, client: ChallengeClient
) -> None:
    """Cheapest first, and no check starts once the pass budget is spent: the honest join
    is admitted in the first pass although the big claim is listed before it."""
    h = harness
    big, honest = _two_answered(h, client)
    assert [p.hotkey for p in client.admissions(RUN)] == [big.ss58_address, honest.ss58_address]
    work: list[CheckWork] = []
    check_admissions(client, h.auditor, RUN, classes=CLASSES, pass_entries=1, work=work)
    assert [w.hotkey for w in work] == [honest.ss58_address]
    assert _status(client, honest)[0] == "admitted" and _status(client, big)[0] == "answered"
    check_admissions(client, h.auditor, RUN, classes=CLASSES, work=work)  # the next pass
    assert [w.hotkey for w in work] == [honest.ss58_address, big.ss58_address]
    assert work[1].entries_built == table_shape(BIG).entries // 256  # the smallest rung
    assert _status(client, big)[0] == "refused"


def test_a_check_over_the_worker_budget_refuses_only_its_island(
    harness: Harness, client: ChallengeClient
) -> None:
    h = harness
    big, honest = _two_answered(h, client)
    work: list[CheckWork] = []
    budget = table_shape(1 << 20).entries  # the honest table fits, the big one does not
    check_admissions(client, h.auditor, RUN, classes=CLASSES, max_entries=budget, work=work)
    spent = {w.hotkey: (w.entries_built, w.refusal) for w in work}
    assert spent == {
        honest.ss58_address: (budget, None),
        big.ss58_address: (0, "check_budget"),  # refused before anything was built
    }
    assert _status(client, honest) == ("admitted", "")
    status, reason = _status(client, big)
    assert status == "refused" and reason.startswith("check_budget: ")


def test_a_check_that_raises_on_the_island_bytes_is_its_refusal() -> None:
    """The worker's own code: a sample naming a device the claims do not have raises
    inside the check; it comes back as a typed refusal, never as an exception."""
    item = PendingAdmission(
        hotkey="5" + "F" * 47,
        device_class=DEVICE_CLASS,
        seed=7,
        seed_beacon_round=1,
        workload_steps=2,
        memory_claims=[1 << 20],
        memory_sample=[(3, 0)],
        memory_answers=["00" * 16],
    )
    assert check_cost(item) == 0
    _, memory = one_check(item, CPU, max_entries=1 << 30)
    assert memory.refusal == "check_failed" and memory.entries_built == 0
    assert memory.detail.startswith("IndexError")


def test_each_refusal_doubles_the_backoff(harness: Harness, client: ChallengeClient) -> None:
    h, key = harness, harness.miners[2]
    base = h.state.settings.admission_backoff_rounds
    for refusals in (1, 2):
        assert _join(h, key, 1 << 20) == "challenged"
        h.tick(1)
        _answer(client, key, honest=False)
        h.tick(1)
        check_admissions(client, h.auditor, RUN, classes=CLASSES)
        assert _status(client, key)[0] == "refused"
        wait = base << (refusals - 1)
        h.tick(wait - 1)
        assert _join(h, key, 1 << 20) == "backoff"
        h.tick(1)
    assert _join(h, key, 1 << 20) == "challenged"
