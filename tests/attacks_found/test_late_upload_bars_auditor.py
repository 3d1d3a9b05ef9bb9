"""An island withholds its selected checkpoint past the upload deadline, uploads it later,
disputes the (true) ``unverifiable`` verdict, and gets the honest auditor barred.

docs/miner.md: "The upload deadline is half the audit window after the selecting beacon
round; a selected checkpoint missing after that is a fault, like any wrong byte."
docs/mechanism.md (Disputes): an ``unverifiable`` verdict opens a ``recompute`` dispute,
"another auditor re-audits them from the public records, and a ``match`` overturns the lie
and bars its auditor"; docs/threats.md (Auditor): an honest auditor is barred "only when that
re-audit agrees with the island".

The relay accepts the checkpoint after the deadline and nothing records when it arrived, so
the independent re-audit (run later, by the real auditor code) finds every byte and signs
``match``. The service then overturns a verdict that was true when it was signed, bars the
honest auditor for the rest of the run, refuses its later verdicts and sets aside every other
verdict it signed in a round not yet final (including, here, its ``mismatch`` on a real
cheater). The withholding island loses nothing: its verdict is overturned, its round paid.

Part 1 plays both audits with the real ``Auditor.judge`` on a really trained round; part 2
feeds exactly those two outcomes to the real challenge service over its HTTP routes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hypertrain.auditor.runner import Auditor
from hypertrain.evidence.index import upload_deadline
from hypertrain.protocol.messages import AuditAssignment
from tests.auditor.islands import BeaconClock, published_round
from tests.auditor.world import ISLANDS as WORLD_ISLANDS
from tests.auditor.world import World, make_world
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    RUN,
    Service,
    barred,
    commit_round_0,
    send_verdict,
    service,
    verdict_body,
)
from tests.challenge.disputeplay import open_body

__all__ = ["service"]  # the real service on a stepped beacon, referees named


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("world"))


def _judge(world: World, relay: Any, clock: BeaconClock, detail: Any, seg: int) -> Any:
    service: Any = clock  # the service as the upload wait sees it: the beacon round
    auditor = Auditor(
        service, relay, WORLD_ISLANDS[2], world.manifest, world.dataset_dir, upload_poll_s=0
    )
    assignment = AuditAssignment(
        round=0, hotkey=WORLD_ISLANDS[0].ss58_address, segments=[seg], selection_beacon_round=5
    )
    return auditor.judge(detail, assignment)


def _post_verdict(svc: Service, auditor: Any, island: Any, result: str, detail: str = "") -> Any:
    body = verdict_body(svc, island, result, detail=detail, update_checked=True)
    if result == "mismatch":
        body |= {"first_bad_leaf": body["segments"][0] + 1, "check": "segment"}
    r = send_verdict(svc, auditor, body)
    assert r.status_code == 200, r.text
    return r.json()["verdict_id"], body["segments"]


def test_a_checkpoint_uploaded_after_its_deadline_does_not_bar_the_auditor_who_saw_it_missing(
    world: World, service: Service, tmp_path: Path
) -> None:
    """Proves an overturned ``unverifiable`` verdict (bytes uploaded after the deadline)
    never bars the auditor that saw them missing, nor sets its other verdicts aside."""
    # part 1: the real auditor, on a really trained round
    relay, detail, index = published_round(world, tmp_path)
    held = relay.blobs.pop(index.blobs[1])  # the island withholds its selected checkpoint
    clock = BeaconClock(5)
    first = _judge(world, relay, clock, detail, 1)
    assert clock.round > upload_deadline(5, world.manifest.round.audit_window_rounds)
    assert first.result == "unverifiable", first.detail  # true when it was signed
    relay.blobs[index.blobs[1]] = held  # uploaded after the deadline: the relay takes it
    reaudit = _judge(world, relay, BeaconClock(10**6), detail, 1)  # later, another auditor
    assert reaudit.result == "match", reaudit.detail

    # part 2: the service, given exactly those two outcomes
    commit_round_0(service)
    withholder, cheater = ISLANDS
    verdict_id, segments = _post_verdict(service, AUDITOR, withholder, first.result, first.detail)
    caught, _ = _post_verdict(service, AUDITOR, cheater, "mismatch")  # a real catch
    opened = service.post(
        "/v1/disputes", withholder, "dispute-open", open_body(verdict_id, segments[-1])
    )
    assert opened.status_code == 200, opened.text
    _post_verdict(service, OTHER_AUDITOR, withholder, reaudit.result)  # the re-audit
    faulty = barred(service)
    queue = service.client.get(f"/v1/runs/{RUN}/reassigned").json()
    set_aside = [q["verdict_id"] for q in queue]
    assert AUDITOR.ss58_address not in faulty, (
        "an auditor that truly found a selected checkpoint missing past its upload deadline"
        f" was barred once the island uploaded it late; its catch {caught[:12]} is set aside:"
        f" {caught in set_aside}"
    )
