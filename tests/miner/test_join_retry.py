"""``join`` after a late admission answer: a fresh challenge, a bounded number of times.

The service is the real app on a hand-stepped beacon; the miner's waits move that beacon
one round each and let a worker check pending answers, so the test never depends on how
fast this machine computes. A loaded machine is a client whose first answers are posted
only after the beacon has passed their deadline.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
import torch

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import AdmissionAnswerAck, AdmissionStatus, JoinAnswer
from hypertrain.auditor.admission import check_admissions
from hypertrain.miner.cli import build_parser
from hypertrain.miner.config import MinerConfig, config_from_args, load_config
from hypertrain.miner.errors import ConfigError
from hypertrain.miner.joining import AdmissionLateError, join_run
from hypertrain.miner.report import Reporter
from hypertrain.protocol.envelope import Envelope, seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import JoinRequest
from tests.challenge.conftest import Harness, harness, miner_keys  # noqa: F401
from tests.challenge.helpers import DEVICE_CLASS, bearer, join_body, manifest_doc

RUN = "run-late"
CPU = [torch.device("cpu")]
WINDOW = 2  # answer window in beacon rounds after the seed round


class LoadedIsland(ChallengeClient):
    """The island's client: its first ``late`` answers reach the service after their
    deadline (the beacon is moved past it first); ``wrong`` answers carry a wrong hash."""

    def __init__(self, h: Harness, key: Hotkey, *, late: int = 0, wrong: bool = False) -> None:
        super().__init__("http://testserver", http=h.client)
        self.h, self.key, self.late, self.wrong = h, key, late, wrong
        self.challenges: list[JoinAnswer] = []  # every join that opened a challenge
        self.answered: list[AdmissionStatus] = []  # the challenge each answer was for

    def join(self, envelope: Envelope) -> JoinAnswer:
        answer = super().join(envelope)
        self.challenges.append(answer)
        return answer

    def admission_answer(self, envelope: Envelope) -> AdmissionAnswerAck:
        status = self.admission_status(RUN, self.key.ss58_address)
        self.answered.append(status)
        if len(self.answered) <= self.late:  # busy until after the deadline
            self.h.tick(status.answer_deadline_round + 1 - self.h.beacon.round)
        if self.wrong:
            body = {**envelope.body, "hashes": ["00" * 32] * len(envelope.body["hashes"])}
            envelope = seal(
                self.key,
                domain=envelope.domain,
                run_id=RUN,
                body=body,
                expiry_round=envelope.expiry_round,
            )
        return super().admission_answer(envelope)


@pytest.fixture
def run(harness: Harness) -> Harness:  # noqa: F811
    doc = manifest_doc(RUN)
    doc["admission"] = {"delay_rounds": 1, "answer_window_rounds": WINDOW, "workload_steps": 2}
    r = harness.client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
    assert r.status_code == 200, r.text
    return harness


def _wait(h: Harness) -> Any:
    """The miner's wait: one beacon round passes and the worker checks what is pending."""
    worker = ChallengeClient("http://testserver", worker_token="w" * 32, http=h.client)

    def sleep(_seconds: float) -> None:
        h.tick(1)
        check_admissions(worker, h.auditor, RUN, classes=frozenset({DEVICE_CLASS}))

    return sleep


def _join(h: Harness, island: LoadedIsland, attempts: int) -> tuple[bool, list[dict[str, Any]]]:
    out = io.StringIO()
    cfg = MinerConfig(run_id=RUN, poll_s=0.01, join_attempts=attempts)
    body = JoinRequest.model_validate(join_body())
    try:
        admitted = join_run(
            island, island.key, cfg, body, Reporter("miner", out), devices=CPU, sleep=_wait(h)
        )
    finally:
        events = [json.loads(line) for line in out.getvalue().splitlines()]
    return admitted, events


def _roster(island: LoadedIsland) -> set[str]:
    return {r.hotkey for r in island.roster(RUN)}


def test_a_late_first_answer_is_tried_again_with_a_fresh_challenge(run: Harness) -> None:
    island = LoadedIsland(run, run.miners[0], late=1)
    admitted, events = _join(run, island, attempts=3)
    assert admitted and island.key.ss58_address in _roster(island)
    first, second = island.answered
    # a new challenge: its seed comes from a beacon round after the first one's deadline
    assert second.seed_beacon_round > first.answer_deadline_round
    assert second.seed != first.seed and len(island.challenges) == 2
    late = [e for e in events if e["event"] == "admission_late"]
    assert [(e["attempt"], e["attempts"], e["deadline_round"]) for e in late] == [
        (1, 3, first.answer_deadline_round)
    ]
    assert late[0]["reason"].startswith("late: answer at round")
    assert [e["event"] for e in events] == ["admission_late", "admission_backoff"]


def test_an_answer_late_every_time_fails_after_the_attempts(run: Harness) -> None:
    island = LoadedIsland(run, run.miners[1], late=99)
    with pytest.raises(AdmissionLateError) as failed:
        _join(run, island, attempts=2)
    deadlines = [s.answer_deadline_round for s in island.answered]
    assert (failed.value.attempts, failed.value.deadline_rounds) == (2, deadlines)
    text = str(failed.value)
    assert "late in all 2 attempt(s)" in text and "--join-attempts" in text
    assert f"beacon round(s) {deadlines[0]}, {deadlines[1]}" in text
    assert len(island.challenges) == 2 and island.key.ss58_address not in _roster(island)
    # a join started later, inside the service's backoff, is refused at once, not waited
    with pytest.raises(ServiceError) as held:
        _join(run, island, attempts=2)
    assert held.value.code == "backoff" and len(island.challenges) == 2


def test_a_refusal_for_a_wrong_answer_is_not_retried(run: Harness) -> None:
    island = LoadedIsland(run, run.miners[2], wrong=True)
    admitted, events = _join(run, island, attempts=3)
    status = island.admission_status(RUN, island.key.ss58_address)
    assert not admitted and status.status == "refused"
    assert "differ from the reference" in (status.reason or "")
    assert len(island.challenges) == 1 and len(island.answered) == 1 and events == []


def test_the_attempts_come_from_the_flag_or_miner_toml(tmp_path: Any) -> None:
    assert MinerConfig().join_attempts == 3
    args = build_parser().parse_args(["join", "--join-attempts", "5"])
    assert config_from_args(args).join_attempts == 5
    toml = tmp_path / "miner.toml"
    toml.write_text("[node]\njoin_attempts = 0\n")
    with pytest.raises(ConfigError, match="join_attempts"):
        load_config(toml)
