"""``carry_stored`` and the dashboard's byte count, on the real service.

The per-round count (``dashboard.traffic._audits``) charges no carried state to an
island the round-open record lists in ``carry_stored`` (it uploads none:
``miner.checkpoints.carried_checkpoint``), and that is pinned below. The steady state
*expected at the audit rate* (``traffic.expected``, ``protocol.traffic.uploads_per_audit``)
still charges every audit under ``carry`` one carried state, as before the mechanism: an
audited island is listed (uploads nothing) whenever its previous round was audited and
matched, which at audit rate ``q`` is about a share ``q`` of its audits (all of them at
rate 1, as in a devnet probation). The expected figure therefore overstates the steady
bytes by up to one training state per audit and understates the ratio.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hypertrain.challenge.dashboard.traffic import state_bytes
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.traffic import uploads_per_audit
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

RUN = "run-carry-dashboard"
ISLANDS = tuple(Hotkey.from_seed(bytes([0xB0 + i]) * 32) for i in range(3))


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], Any]]:
    """Three rounds at audit rate 1 under ``carry``, every island matched every round:
    the dashboard, and every round's detail."""
    with joined_run(tmp_path_factory.mktemp("carry-dash"), carry_doc(RUN), ISLANDS) as svc:
        details = [_round(svc, index) for index in range(3)]
        yield svc.client.get(f"/v1/runs/{RUN}/dashboard").json(), details


def _round(svc: Service, index: int) -> dict[str, Any]:
    assert open_round(svc, run_id=RUN) == index
    for key in ISLANDS:
        body = commit_body(index, island=key.ss58_address)
        assert svc.client.post("/v1/commit", json=signed(key, "commit", body, RUN)).is_success
    while round_detail(svc, index, run_id=RUN)["phase"] == "train":
        svc.tick(1)
    for a in svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/{index}/assignments", headers=bearer("worker")
    ).json():
        body = {**a["body"], "result": "match", "update_checked": True}
        body.pop("selection_beacon_round")
        posted = svc.client.post(
            "/worker/v1/verdict",
            headers=bearer("worker"),
            json=signed(AUDITOR, "verdict", body, RUN),
        )
        assert posted.is_success, posted.text
    svc.tick(3)
    merged = post_tape(
        svc, tape(index, included=sorted(k.ss58_address for k in ISLANDS)), run_id=RUN
    )
    assert merged.status_code == 200, merged.text
    svc.tick(3)
    return round_detail(svc, index, run_id=RUN)


def test_a_listed_islands_audit_is_charged_no_carried_state(
    board: tuple[dict[str, Any], Any],
) -> None:
    """Defence (passes): every round after the first lists every island (matched the
    round before), and the round's count is exactly the selected segments but segment 0."""
    dash, details = board
    manifest = RunManifest.model_validate(carry_doc(RUN))
    one = state_bytes(manifest, dash["model"]["parameters"])
    everyone = sorted(k.ss58_address for k in ISLANDS)
    assert [d["open"]["body"].get("carry_stored", []) for d in details] == [[], everyone, everyone]
    segments = [
        sum(k > 0 for a in d["assignments"] for k in a["body"]["segments"]) for d in details
    ]
    counted = [r["traffic"]["checkpoints"] // one for r in dash["rounds"]]
    assert counted == segments, (counted, segments)


def test_the_expected_steady_state_charges_no_carried_state_that_is_never_uploaded(
    board: tuple[dict[str, Any], Any],
) -> None:
    """Found by an attacker review, fixed (a miscount of the projection only). At
    audit rate 1 every steady audit's island is listed in ``carry_stored`` and uploads no
    carried state (the test above), yet ``traffic.expected`` charged each audit one. Now
    it charges the carried state to ``1 - rate`` of the audits
    (``protocol.traffic.uploads_per_audit``)."""
    dash, _ = board
    manifest = RunManifest.model_validate(carry_doc(RUN))
    expected = dash["traffic"]["expected"]
    assert expected is not None and expected["audit_rate"] == 1.0
    segments = manifest.round.inner_steps // manifest.round.checkpoint_interval
    picked = uploads_per_audit(segments, manifest.audit.segments, carried=False)
    most = picked + (1.0 - manifest.audit.rate)
    assert expected["uploads_per_audit"] <= most + 1e-9, (expected["uploads_per_audit"], most)
