"""The miner keeps a round's checkpoints while a fault-bearing verdict on it can still come.

``prune_closed`` (what ``watch --follow`` runs each pass) against the real service: an
assignment of this island with no verdict keeps the round past its dispute deadline; a
late verdict keeps it through that verdict's own window; then it is pruned.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from hypertrain.api.client import ChallengeClient
from hypertrain.miner.config import MinerConfig
from hypertrain.miner.context import RunContext
from hypertrain.miner.disputes import prune_closed
from hypertrain.miner.report import Reporter
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    RUN,
    WINDOW,
    Service,
    commit_round_0,
    merge,
    send_verdict,
    service,
    verdict_body,
)
from tests.challenge.helpers import TOKENS

__all__ = ["service"]  # the fixture, by name


def _verdict(svc: Service, island: Any, result: str) -> str:
    body = verdict_body(svc, island, result, update_checked=result == "match")
    if result == "mismatch":
        body["first_bad_leaf"] = body["segments"][0] + 1
    r = send_verdict(svc, AUDITOR, body)
    assert r.status_code == 200, r.text
    return str(r.json()["verdict_id"])


class Watch:
    """One island's pruning pass, with the first-seen stamps its verdict loop keeps."""

    def __init__(self, svc: Service, tmp: Path, island: Any) -> None:
        client = ChallengeClient(
            "http://testserver", worker_token=TOKENS["worker"], http=svc.client
        )
        config = MinerConfig(run_id=RUN, state_dir=str(tmp / "state"))
        self.ctx = RunContext(config, client, client.manifest(RUN))
        self.key, self.seen = island, dict[str, int]()
        self.workdir = config.round_dir(0)
        self.workdir.mkdir(parents=True)
        for i in range(5):
            (self.workdir / f"ckpt_{i}.bin").write_bytes(b"x")

    def see(self, verdict_id: str) -> None:
        self.seen.setdefault(verdict_id, self.ctx.service.beacon_round())

    def prune(self) -> int:
        rounds = self.ctx.service.rounds(RUN)
        return prune_closed(self.ctx, self.key, rounds, Reporter("miner", io.StringIO()), self.seen)

    def files(self) -> int:
        return len(list(self.workdir.glob("ckpt_*.bin")))


def test_a_round_is_kept_while_its_audit_waits_and_through_a_late_verdicts_window(
    service: Service, tmp_path: Path
) -> None:
    victim, other = ISLANDS
    commit_round_0(service)
    waiting, judged = Watch(service, tmp_path / "a", victim), Watch(service, tmp_path / "b", other)
    judged.see(_verdict(service, other, "match"))  # seen as it arrives, in the audit window
    service.tick(30)
    merge(service, 0, pending=True)
    service.tick(20)  # final, past the round's dispute deadline
    assert judged.prune() == 4  # judged, window closed: all but the last checkpoint go
    assert waiting.prune() == 0  # its audit has no verdict yet: one may still arrive
    late = _verdict(service, victim, "mismatch")  # accepted, with a window of its own
    assert waiting.prune() == 0  # not seen yet by the verdict loop
    waiting.see(late)
    service.tick(WINDOW)
    assert waiting.prune() == 0  # the late verdict's own window is still open
    assert waiting.files() == 5
    service.tick(1)
    assert waiting.prune() == 4
