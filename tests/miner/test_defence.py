"""The island defends every fault-bearing verdict by the dispute the service admits for it.

Against the real service (three listed auditors) and a real relay on loopback, one
verdict per case on the island's round 0, then the island's :func:`defend`:

* a ``start`` mismatch (leaf 0), an ``update`` mismatch and an ``unverifiable`` are
  contested by a ``recompute`` dispute, a segment mismatch by the bisection game on its
  first differing segment, each only when the island's local check refutes it;
* a verdict the local check confirms (its start state, replay or update differs, its
  bytes are really not at the relay) is not disputed, and the ``defence`` event says so.

The island's recomputed values (what training would give it) are stated through the
:class:`~hypertrain.miner.recompute.Recompute` the defence takes; the comparison with its
committed leaves, the relay check and the opening are the production code's.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hypertrain.api.client import ChallengeClient
from hypertrain.miner.config import MinerConfig
from hypertrain.miner.context import RunContext
from hypertrain.miner.defence import Defence, defend, target
from hypertrain.miner.report import Reporter
from hypertrain.protocol.messages import Verdict
from hypertrain.relay.client import RelayClient
from tests.challenge.dispute_scenario import (
    HONEST,
    ISLANDS,
    LIAR,
    OTHER_AUDITOR,
    RULES,
    RUN,
    THIRD_AUDITOR,
    Service,
    clock,
    commit_round_0,
    jury_run,
    keys,
    relay,
    send_verdict,
    serve,
    serve_evidence,
)
from tests.challenge.disputeplay import LEAVES
from tests.challenge.helpers import commit_body
from tests.relay.conftest import Running

__all__ = ["clock", "keys", "relay", "serve"]  # fixtures, by name
UPDATE_SHA = commit_body(0)["update_sha256"]
NUM_SEGMENTS = len(LEAVES) - 1  # the commits' leaf count is the tree's


@pytest.fixture
def three(tmp_path: Path) -> Iterator[Service]:
    """Three listed auditors; every segment audited (so the update check is one)."""
    auditors = (LIAR, OTHER_AUDITOR, THIRD_AUDITOR)
    rules = {**RULES, "referees": []}
    with jury_run(tmp_path, rules, auditors, segments=NUM_SEGMENTS) as svc:
        yield svc


@dataclass(frozen=True)
class Told:
    """What the island's own recomputation gives: its committed values, or other ones."""

    honest: bool

    def _leaf(self, k: int) -> bytes:
        return LEAVES[k] if self.honest else b"\x07" * 32

    def start_hash(self, index: int) -> bytes:
        return self._leaf(0)

    def segment_end(self, index: int, segment: int) -> bytes:
        return self._leaf(segment + 1)

    def update_sha256(self, index: int, final_leaf: bytes) -> str:
        assert final_leaf == LEAVES[-1]  # the committed last leaf, from the relay's index
        return UPDATE_SHA if self.honest else "07" * 32


def _kinds(segments: list[int]) -> dict[str, dict[str, Any]]:
    """The verdict fields of each case, for the assignment's ``segments``."""
    k = min(segments)
    return {
        "start": {"result": "mismatch", "first_bad_leaf": 0, "check": "start"},
        "segment": {"result": "mismatch", "first_bad_leaf": k + 1, "check": "segment"},
        "update": {
            "result": "mismatch",
            "first_bad_leaf": NUM_SEGMENTS,
            "check": "update",
            "update_checked": True,
        },
        "unverifiable": {"result": "unverifiable", "detail": "checkpoint withheld"},
    }


def _judged(svc: Service, relay_url: str, kind: str, served: bool) -> tuple[str, Verdict]:
    """Round 0 committed (the island's evidence at the relay when ``served``) and judged."""
    url = serve_evidence(relay_url, HONEST) if served else f"{relay_url}/blobs/{'ee' * 32}"
    mine = commit_round_0(svc, {k.ss58_address: url for k in ISLANDS})  # HONEST's
    verdict = {**mine, **_kinds(mine["segments"])[kind]}
    verdict.pop("selection_beacon_round")
    r = send_verdict(svc, LIAR, verdict)
    assert r.status_code == 200, r.text
    return str(r.json()["verdict_id"]), Verdict.model_validate(verdict)


def _defend(
    svc: Service, relay_url: str, tmp: Path, verdict_id: str, body: Verdict, told: Told
) -> tuple[Defence, list[dict[str, Any]]]:
    service = ChallengeClient("http://testserver", http=svc.client)
    config = MinerConfig(
        service_url="http://testserver", relay_url=relay_url, run_id=RUN, state_dir=str(tmp)
    )
    ctx = RunContext(config, service, service.manifest(RUN))
    out = io.StringIO()
    with RelayClient(relay_url, HONEST, RUN) as client:
        decision = defend(ctx, HONEST, client, verdict_id, body, Reporter("miner", out), told)
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    return decision, events


WHY = {  # what the island's check finds when the verdict is right
    "start": "start_differs",
    "segment": "replay_differs",
    "update": "update_differs",
    "unverifiable": "withheld",
}
# kind, bytes served, the island's recomputation agrees with its commit: the game's
# stage once disputed (None: no dispute)
CASES = [
    ("start", True, True, "recompute"),
    ("segment", True, True, "step"),
    ("update", True, True, "recompute"),
    ("unverifiable", True, True, "recompute"),
    ("start", True, False, None),
    ("segment", True, False, None),
    ("update", True, False, None),
    ("unverifiable", False, True, None),  # the bytes really are not at the relay
]


@pytest.mark.parametrize(("kind", "served", "honest", "stage"), CASES)
def test_each_fault_bearing_verdict_gets_its_admitted_dispute_or_none(
    three: Service,
    relay: Running,
    tmp_path: Path,
    kind: str,
    served: bool,
    honest: bool,
    stage: str | None,
) -> None:
    verdict_id, body = _judged(three, relay.url, kind, served)
    decision, events = _defend(three, relay.url, tmp_path, verdict_id, body, Told(honest))
    disputes = [
        d for d in three.client.get("/v1/disputes", params={"run_id": RUN}).json()
        if d["verdict_id"] == verdict_id
    ]  # fmt: skip
    [event] = [e for e in events if e["event"] == "defence"]
    assert event["check"] == decision.check == kind
    assert event["action"] == decision.action
    if stage is None:
        assert not disputes, f"the island disputed a {kind} verdict its own check confirms"
        assert decision.action == "accept" and event["reason"] == decision.reason == WHY[kind]
        return
    [game] = [d["game"] for d in disputes]
    assert decision.action == "dispute" and decision.reason == event["reason"] == "refuted"
    assert decision.dispute_id == disputes[0]["dispute_id"]
    assert game["stage"] == stage and game["check"] == kind
    if kind == "segment":
        assert game["segment"] == body.first_bad_leaf - 1  # type: ignore[operator]


def test_a_start_mismatch_is_not_read_as_no_bad_leaf() -> None:
    """``first_bad_leaf == 0`` is the start check, never "no differing leaf"."""
    body = Verdict(
        round=0, hotkey=HONEST.ss58_address, segments=[1], result="mismatch", first_bad_leaf=0
    )
    aim = target(body, NUM_SEGMENTS)
    assert aim is not None and aim.check == "start" and aim.segment == 1
    no_leaf = body.model_copy(update={"first_bad_leaf": None})
    assert target(no_leaf, NUM_SEGMENTS) is None
    match = body.model_copy(update={"result": "match"})
    assert target(match, NUM_SEGMENTS) is None
