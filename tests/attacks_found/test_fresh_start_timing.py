"""``fresh_start`` against timing: a fault verdict that lands after the round opened.

The round-open record fixes ``fresh_start`` (``facts.proven_faults`` at the open); the
audit selection reads ``accused_before`` when it selects. A verdict on an earlier
round that lands in between (an audit left pending when its round merged, judged after
the next round opened) makes the island replayed this round while the record still has
it carry its state: the miner, the auditor and the dashboard must then all agree that
its audit needs its previous final checkpoint (nothing reads the selection's set as the
start policy), and it starts fresh from the next round on. Played on the real service
with a hand-advanced beacon.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hypertrain.challenge import facts
from hypertrain.challenge.dashboard.traffic import carried_bytes, state_bytes
from hypertrain.evidence.start import carries_previous
from hypertrain.miner.checkpoints import CARRIED_FILE, carried_checkpoint
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import RoundOpen
from tests.challenge.dispute_scenario import (
    AUDITOR,
    Service,
    carry_doc,
    joined_run,
    open_round,
    post_tape,
    round_detail,
    tape,
)
from tests.challenge.helpers import bearer, commit_body, signed

RUN = "run-fresh-timing"
HONEST, LATE = (Hotkey.from_seed(bytes([0x70 + i]) * 32) for i in range(2))
ISLANDS = (HONEST, LATE)


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Service]:
    with joined_run(tmp_path, carry_doc(RUN), ISLANDS) as service:
        yield service


def _detail(svc: Service, index: int) -> dict[str, Any]:
    return round_detail(svc, index, run_id=RUN)


def _commit_and_select(svc: Service, index: int) -> None:
    for key in ISLANDS:
        body = commit_body(index, island=key.ss58_address)
        posted = svc.client.post("/v1/commit", json=signed(key, "commit", body, RUN))
        assert posted.status_code == 200, posted.text
    while _detail(svc, index)["phase"] == "train":
        svc.tick(1)


def _verdict(svc: Service, index: int, key: Hotkey, result: str) -> Any:
    for a in svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/{index}/assignments", headers=bearer("worker")
    ).json():
        if a["body"]["hotkey"] == key.ss58_address:
            body = {**a["body"], "result": result, "update_checked": result == "match"}
            body.pop("selection_beacon_round")
            if result == "unverifiable":
                body["detail"] = "index withheld"
            return svc.client.post(
                "/worker/v1/verdict", headers=bearer("worker"),
                json=signed(AUDITOR, "verdict", body, RUN),
            )  # fmt: skip
    raise AssertionError(f"{key.ss58_address} has no assignment in round {index}")


def _merge(svc: Service, index: int, included: list[Hotkey], pending: list[Hotkey]) -> None:
    body = tape(
        index,
        included=sorted(k.ss58_address for k in included),
        excluded={k.ss58_address: "audit_pending" for k in pending},
    )
    merged = post_tape(svc, body, run_id=RUN)
    assert merged.status_code == 200, merged.text
    svc.tick(3)


def test_a_verdict_after_the_open_is_replayed_with_its_carried_state(
    svc: Service, tmp_path: Path
) -> None:
    late = LATE.ss58_address
    assert open_round(svc, run_id=RUN) == 0
    _commit_and_select(svc, 0)
    assert _verdict(svc, 0, HONEST, "match").is_success
    svc.tick(3)
    _merge(svc, 0, [HONEST], [LATE])  # LATE's audit is still pending when round 0 merges
    svc.tick(40)
    assert open_round(svc, run_id=RUN) == 1
    record = RoundOpen.model_validate(_detail(svc, 1)["open"]["body"])
    assert record.fresh_start == []  # nothing accused LATE yet
    # HONEST's round 0 was matched (its auditor stored that carried state); LATE's was not
    assert record.carry_stored == [HONEST.ss58_address]
    # the pending verdict lands after round 1 opened, before its selection
    answer = _verdict(svc, 0, LATE, "unverifiable")
    assert answer.is_success, answer.text
    state = svc.client.app.state.service  # type: ignore[attr-defined]
    assert late in facts.accused_before(state.conn, RUN, 1)
    _commit_and_select(svc, 1)
    audited = {a["body"]["hotkey"] for a in _detail(svc, 1)["assignments"]}
    assert late in audited  # replayed this round (rate 1 and accused)
    # miner and auditor both read the record: LATE's start carries its round-0 state
    manifest = RunManifest.model_validate(carry_doc(RUN))
    assert carries_previous(manifest, record, late)
    kept = tmp_path / "r0"
    kept.mkdir()
    (kept / CARRIED_FILE).write_bytes(b"x")
    assert carried_checkpoint(manifest, record, late, kept, committed=True) == kept / CARRIED_FILE
    # the dashboard charges LATE's carried state in round 1, not HONEST's
    board = svc.client.get(f"/v1/runs/{RUN}/dashboard").json()
    params = board["model"]["parameters"]
    one, carried = state_bytes(manifest, params), carried_bytes(manifest, params)
    segments = sum(k > 0 for a in _detail(svc, 1)["assignments"] for k in a["body"]["segments"])
    (r1,) = [r for r in board["rounds"] if r["round"] == 1]
    assert r1["traffic"]["checkpoints"] == segments * one + carried, r1["traffic"]
    # from round 2 on, LATE starts fresh
    for key in ISLANDS:
        _verdict(svc, 1, key, "match")
    svc.tick(3)
    _merge(svc, 1, [HONEST], [LATE])
    svc.tick(40)
    assert open_round(svc, run_id=RUN) == 2
    assert _detail(svc, 2)["open"]["body"]["fresh_start"] == [late]


def test_a_fault_a_dispute_may_still_overturn_starts_nobody_fresh(svc: Service) -> None:
    """Only a proven (booked, final) fault lists an island: an accusation still inside
    its dispute window changes no island's training (else one lying verdict, standing
    until a dispute overturns it, would restart an honest island's optimizer moments)."""
    late = LATE.ss58_address
    assert open_round(svc, run_id=RUN) == 0
    _commit_and_select(svc, 0)
    assert _verdict(svc, 0, HONEST, "match").is_success
    assert _verdict(svc, 0, LATE, "unverifiable").is_success
    svc.tick(3)
    body = tape(0, included=[HONEST.ss58_address], excluded={late: "audit_mismatch"})
    assert post_tape(svc, body, run_id=RUN).status_code == 200
    svc.tick(1)
    state = svc.client.app.state.service  # type: ignore[attr-defined]
    assert open_round(svc, run_id=RUN) == 1  # round 0 settles in its dispute window
    assert late in facts.accused_before(state.conn, RUN, 1)
    assert (0, late) not in facts.proven_faults(state.conn, RUN)
    record = RoundOpen.model_validate(_detail(svc, 1)["open"]["body"])
    assert record.fresh_start == []
