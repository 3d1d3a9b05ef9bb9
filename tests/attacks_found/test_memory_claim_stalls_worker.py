"""A memory claim the worker must pay for: one join stalls every other island's admission.

docs/mechanism.md (Memory proof): a claim must be "a provable size (1 MiB to 1 TiB)"; the
worker "rebuilds those devices' tables, recomputes exactly the sampled answers" and "pays
one build per sampled device" (64 MiB: 6.6 s). ``check_admissions``: "One bad entry never
stops the rest".

The island chooses the claim and pays nothing for it: it can post sixteen zero answers
per device without building any table. The worker still builds the sampled devices'
tables at the claimed size before it can refuse. Played on the real service with the
auditor's own admission pass:

* a 1 TiB claim (the largest the service accepts) cannot be allocated; the worker's pass
  raises on it, the island stays ``answered``, and every island listed after it (an honest
  1 MiB join) is never checked, at every pass of ``--follow``;
* a claim that does fit (16 GiB: about 28 minutes per sampled device at the measured
  0.1 s per MiB, two devices sampled) holds the auditor's ``--follow`` loop, which checks
  admissions before it audits rounds or answers disputes, for most of an hour per join;
  refused, the island joins again with a new seed (docs: "A refused island may join
  again"), so one registration keeps the worker busy forever (no table built on the
  attacker's side), and its missed audit windows and answer deadlines are the openings of
  atk4-1 and atk4-2.

Fixed: a claim above its device class's cap (64 GiB for ``cpu:*``) is refused at the
join (``claim_too_large``); a claim under it answered with zeros is refused after the
worker built the ladder's smallest rung (1/256 of the table, counted), the honest join is
checked first and admitted in the same pass, and the attacker's next join waits out its
backoff.
"""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest
import torch

from hypertrain.api.client import ChallengeClient
from hypertrain.auditor.admission import CheckWork, check_admissions
from hypertrain.miner.admission import challenge_hashes, memory_answers
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.memproof import prefix_rows, table_shape
from hypertrain.protocol.messages import AdmissionAnswer
from tests.challenge import conftest as _fixtures
from tests.challenge.conftest import Harness
from tests.challenge.helpers import DEVICE_CLASS, bearer, join_body, manifest_doc, signed

harness, miner_keys = _fixtures.harness, _fixtures.miner_keys  # the service fixtures

RUN = "run-claim"
CPU = torch.device("cpu")
TIB = 1 << 40
FITS = 16 << 30  # under the cpu class's cap: the worker's check is sized by it


@pytest.fixture
def client(harness: Harness) -> ChallengeClient:
    doc = manifest_doc(RUN)
    doc["admission"] = {"delay_rounds": 1, "answer_window_rounds": 2, "workload_steps": 2}
    r = harness.client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
    assert r.status_code == 200, r.text
    return ChallengeClient("http://testserver", worker_token="w" * 32, http=harness.client)


@pytest.fixture
def bounded_memory() -> Iterator[None]:
    """No allocation of this process may reach the claim, whatever the host's overcommit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (64 << 30, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _join(h: Harness, key: Hotkey, claim: int) -> tuple[int, str]:
    body = join_body()
    body["devices"][0]["memory_bytes"] = claim
    r = h.client.post("/v1/join", json=signed(key, "join", body, run_id=RUN))
    if r.status_code == 200:
        assert r.json()["admitted"] is False, r.text
        return 200, "challenged"
    return r.status_code, str(r.json()["error"])


def _answer(client: ChallengeClient, key: Hotkey, honest: bool) -> None:
    status = client.admission_status(RUN, key.ss58_address)
    assert status.seed is not None
    hashes = challenge_hashes(status.seed, status.workload_steps, [CPU])
    memory = (
        memory_answers(status.seed, status.memory_claims, [CPU])
        if honest
        else [["00" * 16] * 16]  # no table at all: sixteen zero answers
    )
    body = AdmissionAnswer(seed_beacon_round=status.seed_beacon_round, hashes=hashes, memory=memory)
    client.admission_answer(
        seal(
            key, domain="admission-answer", run_id=RUN, body=body.model_dump(), expiry_round=50_000
        )
    )


def test_a_huge_memory_claim_answered_with_nothing_does_not_stall_other_admissions(
    harness: Harness, client: ChallengeClient, bounded_memory: None
) -> None:
    """Proves a join claiming the largest provable memory is refused before anyone computes,
    and one claiming what fits, answered without any table, neither stops the worker's
    pass nor keeps an honest join behind it from admission, and costs the worker only the
    smallest rung of the ladder."""
    h = harness
    attacker, honest = h.miners[0], h.miners[1]  # the attacker is listed first
    assert _join(h, attacker, TIB) == (403, "claim_too_large")  # nothing opened
    assert _join(h, attacker, FITS) == (200, "challenged")
    assert _join(h, honest, 1 << 20) == (200, "challenged")
    h.tick(1)  # the seed
    _answer(client, attacker, honest=False)
    _answer(client, honest, honest=True)
    h.tick(1)  # the sample
    listed = [p.hotkey for p in client.admissions(RUN)]
    assert listed == [attacker.ss58_address, honest.ss58_address]
    errors: list[str] = []
    work: list[CheckWork] = []
    try:
        check_admissions(
            client,
            h.auditor,
            RUN,
            classes=frozenset({DEVICE_CLASS}),
            emit=lambda event, **f: errors.append(f"{event} {f}"),
            work=work,
        )
    except Exception as exc:  # --follow logs this and starts over, every pass
        errors.append(f"pass stopped: {type(exc).__name__}: {str(exc)[:120]}")
    states = {
        who: client.admission_status(RUN, key.ss58_address).status
        for who, key in (("attacker", attacker), ("honest", honest))
    }
    assert states == {"attacker": "refused", "honest": "admitted"}, (
        f"one {FITS >> 30} GiB claim answered with zeros: {states}; {errors}"
    )
    assert [w.hotkey for w in work] == [honest.ss58_address, attacker.ss58_address]  # cheapest
    shape = table_shape(FITS)
    spent = {w.hotkey: (w.entries_built, w.refusal) for w in work}
    assert spent[attacker.ss58_address] == (
        prefix_rows(shape, 0) * shape.lanes,  # the smallest rung: 1/256 of the table
        "memory_mismatch",
    )
    assert prefix_rows(shape, 0) * shape.lanes == shape.entries // 256
    assert _join(h, attacker, FITS) == (409, "backoff")  # joining again costs it time
