"""A silent island holds no later round open (an outsider's finding, docs/threats.md,
Rounds): an admitted island that never commits stretched every round of the run to its
full commit window. Now a round's commit phase closes early once every *awaited* island
committed: the roster less those rostered in the round before that committed nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario import (
    AUDITOR,
    Service,
    joined_run,
    open_round,
    post_tape,
    tape,
)
from tests.challenge.helpers import bearer, commit_body, manifest_doc, signed

RUN = "run-s"
BUSY, ALSO_BUSY, SILENT = (Hotkey.from_seed(bytes([0x40 + i]) * 32) for i in range(3))
ISLANDS = (BUSY, ALSO_BUSY, SILENT)
COMMIT_WINDOW = 3  # the helpers' manifest: round.commit_window_rounds


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Service]:
    doc = manifest_doc(RUN, rate=1.0, segments=1)
    with joined_run(tmp_path, doc, ISLANDS) as service:
        yield service


def _detail(svc: Service, index: int) -> dict[str, Any]:
    detail: dict[str, Any] = svc.client.get(f"/v1/runs/{RUN}/rounds/{index}").json()
    return detail


def _open(svc: Service) -> int:
    return open_round(svc, run_id=RUN)


def _commit(svc: Service, index: int, *keys: Hotkey) -> None:
    for key in keys:
        body = commit_body(index, island=key.ss58_address)
        posted = svc.client.post("/v1/commit", json=signed(key, "commit", body, RUN))
        assert posted.status_code == 200, posted.text


def _finish(svc: Service, index: int, committed: tuple[Hotkey, ...]) -> None:
    """Judge every assignment ``match``, merge the committed islands, settle."""
    for a in svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/{index}/assignments", headers=bearer("worker")
    ).json():
        body = {**a["body"], "result": "match"}
        body.pop("selection_beacon_round")
        verdict = signed(AUDITOR, "verdict", body, RUN)
        assert svc.client.post(
            "/worker/v1/verdict", headers=bearer("worker"), json=verdict
        ).is_success
    svc.tick(3)
    body = tape(index, included=sorted(k.ss58_address for k in committed), excluded={})
    merged = post_tape(svc, body, run_id=RUN)
    assert merged.status_code == 200, merged.text
    svc.tick(3)


def test_a_silent_island_holds_its_first_round_and_no_later_one(svc: Service) -> None:
    opened = svc.beacon.round
    _open(svc)
    _commit(svc, 0, BUSY, ALSO_BUSY)
    svc.tick(1)
    assert _detail(svc, 0)["phase"] == "train"  # its first round: the silent island is awaited
    svc.tick(COMMIT_WINDOW)
    assert _detail(svc, 0)["selection_beacon_round"] == opened + COMMIT_WINDOW + 1
    _finish(svc, 0, (BUSY, ALSO_BUSY))
    _open(svc)
    start = svc.beacon.round
    _commit(svc, 1, BUSY, ALSO_BUSY)
    svc.tick(1)
    detail = _detail(svc, 1)  # silent in round 0: round 1 closes on the others' work
    assert detail["phase"] == "audit" and detail["selection_beacon_round"] == start + 1, detail


def test_a_silent_island_may_still_commit_and_is_awaited_again(svc: Service) -> None:
    _open(svc)
    _commit(svc, 0, BUSY, ALSO_BUSY)
    svc.tick(COMMIT_WINDOW + 1)
    _finish(svc, 0, (BUSY, ALSO_BUSY))
    _open(svc)
    _commit(svc, 1, SILENT, BUSY, ALSO_BUSY)  # inside the window: accepted
    svc.tick(1)
    _finish(svc, 1, ISLANDS)
    _open(svc)
    start = svc.beacon.round
    _commit(svc, 2, BUSY, ALSO_BUSY)
    svc.tick(1)
    assert _detail(svc, 2)["phase"] == "train"  # it committed to round 1: awaited in round 2
    _commit(svc, 2, SILENT)
    svc.tick(1)
    assert _detail(svc, 2)["selection_beacon_round"] == start + 2
