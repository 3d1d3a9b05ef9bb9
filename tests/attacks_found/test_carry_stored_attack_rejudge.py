"""``carry_stored`` against re-assigned audits: a re-audit's ``match`` stores nothing.

docs/mechanism.md ("A matched island's carried state is stored by its auditor"): an
auditor that matches a round under ``carry`` stores the replayed carried state on the relay
*before* it posts the ``match``, and the next round-open record lists every island with
a standing ``match`` the round before in ``carry_stored``; a listed island uploads no
carried state and its next audit fetches the stored one, waiting (never blaming the
island) while the relay cannot serve it.

Only :func:`hypertrain.auditor.runner.judge_and_post` stores. A re-assigned audit (an
assignment that missed its window, a verdict set aside by a lost game, a ``recompute``
dispute: ``GET /reassigned``) is judged by :func:`hypertrain.auditor.disputes.rejudge`,
which calls ``judge`` and ``post`` directly: its ``match`` stores nothing. The service
cannot tell that ``match`` from a stored one and lists the island; the island uploads
nothing; every later audit of that round (and every re-audit of it after its window,
which goes through ``rejudge`` again) fails to fetch the state and is retried for ever.
So an honest island whose first auditor was merely offline (or which a lying auditor
accused and a re-audit cleared) has its next audited round never judged: that round's
reward, and by ``earlier_unproven`` every later one, stays held; a cheating island's
round is never faulted.

Played with the real auditor over an in-memory relay (tests/auditor/test_runner.py) and
the real service on a stepped beacon (tests/attacks_found/test_fresh_start_timing.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from hypertrain.auditor.disputes import rejudge
from hypertrain.auditor.runner import Auditor
from hypertrain.protocol.envelope import Envelope, seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import AuditAssignment, RoundOpen
from tests.auditor.islands import BeaconClock, MemoryRelay, published_round
from tests.auditor.world import COORD, ISLANDS, RUN_ID, World, make_world
from tests.challenge.dispute_scenario import (
    AUDITOR,
    OTHER_AUDITOR,
    Service,
    carry_doc,
    joined_run,
    open_round,
    post_tape,
    round_detail,
    tape,
)
from tests.challenge.helpers import bearer, commit_body, signed


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    made = make_world(assets_dir, tmp_path_factory.mktemp("rejudge-carry"))
    inner = made.manifest.inner.model_copy(update={"state_policy": "carry"})
    return replace(made, manifest=made.manifest.model_copy(update={"inner": inner}))


@dataclass
class _Item:
    """One row of ``GET /reassigned``: the assignment another auditor did not end."""

    auditor: str
    round: int
    hotkey: str
    assignment: dict[str, Any]


@dataclass
class _Detail:
    open: Envelope
    commits: list[Envelope]
    verdicts: list[Any] = field(default_factory=list)


class _ReassigningService(BeaconClock):
    """The service as ``rejudge`` sees it: one re-assigned audit, and a verdict intake that
    records whether the relay held the matched round's final state when it was posted."""

    def __init__(self, detail: _Detail, item: _Item, relay: MemoryRelay, final: str) -> None:
        super().__init__(10**6)
        self.detail, self.item, self.relay, self.final = detail, item, relay, final
        self.posted: list[tuple[str, bool]] = []

    def reassigned(self, run_id: str) -> list[_Item]:
        return [self.item]

    def round_detail(self, run_id: str, index: int) -> _Detail:
        return self.detail

    def verdict(self, envelope: Envelope) -> None:
        self.posted.append((envelope.body["result"], self.final in self.relay.blobs))


def test_a_reassigned_reaudit_that_matches_stores_the_final_state(
    world: World, tmp_path: Path
) -> None:
    """Found by an attacker review, fixed. ``rejudge`` posted a ``match`` under
    ``carry`` without storing the replayed final state, yet that ``match`` lists the
    island in the next round's ``carry_stored`` exactly as a stored one does (see the
    service test below). Now every posted ``match`` stores first (``Auditor.post``), and
    a listed island still uploads a state the relay lacks."""
    relay, records, index = published_round(world, tmp_path)
    final = index.carried
    assert final is not None
    relay.blobs.pop(final)  # the island never uploads its carried state (miner.checkpoints)
    island = ISLANDS[0].ss58_address
    body = AuditAssignment(round=0, hotkey=island, segments=[0, 1], selection_beacon_round=1)
    raw = seal(
        COORD,
        domain="audit-assignment",
        run_id=RUN_ID,
        body=body.model_dump(mode="json"),
        expiry_round=10**9,
    ).model_dump(mode="json")
    detail = _Detail(records.open, records.commits)
    # the first auditor missed its window (or lost a game): the assignment is re-assigned
    item = _Item(ISLANDS[1].ss58_address, 0, island, raw)
    service = _ReassigningService(detail, item, relay, final)
    auditor = Auditor(
        service,  # type: ignore[arg-type]
        relay,  # type: ignore[arg-type]
        ISLANDS[2],
        world.manifest,
        world.dataset_dir,
        upload_poll_s=0,
    )
    assert rejudge(auditor, lambda *_, **__: None) == 1
    assert [result for result, _ in service.posted] == ["match"]  # the honest island matched
    stored_before_post = service.posted[0][1]
    assert stored_before_post, "a re-audit's match listed the island, but nothing was stored"
    assert hashlib.sha256(relay.blobs[final]).hexdigest() == final


# -- the service side: a re-audit's (late) match lists the island like any other ---------

RUN = "run-carry-rejudge"
HONEST, MISSED = (Hotkey.from_seed(bytes([0x90 + i]) * 32) for i in range(2))


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Service]:
    with joined_run(tmp_path, carry_doc(RUN), (HONEST, MISSED)) as service:
        yield service


def _assignments(svc: Service, index: int) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/{index}/assignments", headers=bearer("worker")
    ).json()
    return got


def _match(svc: Service, auditor: Hotkey, index: int, island: Hotkey) -> Any:
    for a in _assignments(svc, index):
        if a["body"]["hotkey"] == island.ss58_address:
            body = {**a["body"], "result": "match", "update_checked": True}
            body.pop("selection_beacon_round")
            return svc.client.post(
                "/worker/v1/verdict", headers=bearer("worker"),
                json=signed(auditor, "verdict", body, RUN),
            )  # fmt: skip
    raise AssertionError(f"{island.ss58_address} has no assignment in round {index}")


def test_a_reaudit_match_on_a_missed_assignment_lists_the_island(svc: Service) -> None:
    """Pins the service half of the finding above (passes): a missed assignment is
    re-assigned, another auditor's late ``match`` (the verdict ``rejudge`` posts, with
    nothing stored) lands before the next round opens, and the next record lists the
    island in ``carry_stored``: its next audit then fetches a state nobody stored."""
    assert open_round(svc, run_id=RUN) == 0
    for key in (HONEST, MISSED):
        body = commit_body(0, island=key.ss58_address)
        assert svc.client.post("/v1/commit", json=signed(key, "commit", body, RUN)).is_success
    while round_detail(svc, 0, run_id=RUN)["phase"] == "train":
        svc.tick(1)
    assert _match(svc, AUDITOR, 0, HONEST).is_success
    svc.tick(30)  # AUDITOR was down past MISSED's window
    missed = MISSED.ss58_address
    merged = post_tape(
        svc,
        tape(0, included=[HONEST.ss58_address], excluded={missed: "audit_pending"}),
        run_id=RUN,
    )
    assert merged.status_code == 200, merged.text
    listed = svc.client.get(f"/v1/runs/{RUN}/reassigned").json()
    assert [(r["round"], r["hotkey"]) for r in listed] == [(0, missed)], listed
    late = _match(svc, OTHER_AUDITOR, 0, MISSED)  # rejudge's verdict: nothing stored
    assert late.is_success, late.text
    svc.tick(3)
    assert open_round(svc, run_id=RUN) == 1
    record = RoundOpen.model_validate(round_detail(svc, 1, run_id=RUN)["open"]["body"])
    assert missed in record.carry_stored
