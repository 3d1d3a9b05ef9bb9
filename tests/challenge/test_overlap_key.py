"""Overlapped rounds: round ``r + 1``'s samples are fixed by the beacon round that
selected round ``r``'s audits, so an island knows them before round ``r + 1`` opens."""

from __future__ import annotations

from typing import Any

from hypertrain.protocol.round_key import assignment_key, keying_randomness
from tests.challenge.conftest import Harness
from tests.challenge.helpers import (
    AGGREGATOR,
    aggregator_split,
    bearer,
    commit_body,
    join_body,
    manifest_doc,
    signed,
)


def _create(h: Harness, run_id: str, overlap: bool) -> None:
    doc = manifest_doc(run_id)
    if overlap:
        doc["round"]["overlap"] = True
    r = h.client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
    assert r.status_code == 200, r.text
    for key in h.miners[:2]:
        joined = h.client.post("/v1/join", json=signed(key, "join", join_body(), run_id))
        assert joined.status_code == 200, joined.text


def _open(h: Harness, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
    r = h.client.post(f"/admin/v1/runs/{run_id}/rounds", headers=bearer("admin"), json=body)
    assert r.status_code == 200, r.text
    return dict(r.json()["body"])


def _round_zero(h: Harness, run_id: str) -> int:
    """Round 0 opened, committed, selected, merged: the beacon round that selected it."""
    _open(h, run_id, {"start_model_sha256": "aa" * 32, "start_model_url": "http://relay/m0"})
    for key in h.miners[:2]:
        r = h.client.post("/v1/commit", json=signed(key, "commit", commit_body(0), run_id))
        assert r.is_success, r.text
    h.tick(4)
    detail = h.client.get(f"/v1/runs/{run_id}/rounds/0").json()
    assert detail["phase"] == "audit"
    h.tick(2)
    included = [k.ss58_address for k in h.miners[:2]]
    tape = {
        "round": 0, "start_model_sha256": "aa" * 32, "new_model_sha256": "bb" * 32,
        "new_model_url": "http://relay/m1", "outer_state_sha256": "cc" * 32,
        "tape_sha256": "dd" * 32, "eval_loss": 3.25, "included": included,
    }  # fmt: skip
    tape |= aggregator_split(h.client, run_id, 0, included)
    envelope = signed(AGGREGATOR, "merge-tape", tape, run_id)
    merged = h.client.post("/worker/v1/merge", headers=bearer("worker"), json=envelope)
    assert merged.status_code == 200, merged.text
    return int(detail["selection_beacon_round"])


def test_an_overlapped_round_is_keyed_by_the_previous_selection(harness: Harness) -> None:
    h = harness
    for run_id, overlap in (("run-ov", True), ("run-seq", False)):
        _create(h, run_id, overlap)
        selected = _round_zero(h, run_id)
        record = _open(h, run_id, {})
        by_selection = assignment_key(run_id, 1, h.beacon.get(selected).randomness)
        at_open = assignment_key(run_id, 1, h.beacon.get(record["beacon_round"]).randomness)
        assert record["beacon_round"] > selected
        assert record["assignment_key"] == (by_selection if overlap else at_open)


def test_keying_randomness_falls_back_to_the_open_beacon() -> None:
    assert keying_randomness(True, "aa", "bb") == "bb"
    assert keying_randomness(True, "aa", None) == "aa"  # no previous selection
    assert keying_randomness(False, "aa", "bb") == "aa"
