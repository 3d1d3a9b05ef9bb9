"""The round state machine on a hand-stepped beacon: phases, deadlines, verdicts, merge."""

from __future__ import annotations

from typing import Any

from hypertrain.challenge.rounds.selection import select_audits
from hypertrain.protocol.envelope import open_envelope
from hypertrain.protocol.identity import Hotkey
from tests.challenge.conftest import Harness
from tests.challenge.helpers import (
    AGGREGATOR,
    aggregator_split,
    bearer,
    commit_body,
    join_body,
    signed,
)

START = "aa" * 32
MINERS = [Hotkey.from_seed(bytes([i + 1]) * 32) for i in range(4)]  # conftest's miner_keys


def _open(h: Harness) -> dict[str, Any]:
    for key in h.miners[:3]:
        assert h.client.post("/v1/join", json=signed(key, "join", join_body())).status_code == 200
    r = h.client.post(
        "/admin/v1/runs/run-1/rounds",
        headers=bearer("admin"),
        json={"start_model_sha256": START, "start_model_url": "http://relay/m0"},
    )
    assert r.status_code == 200, r.text
    return r.json()


def _phase(h: Harness, index: int = 0) -> str:
    return str(h.client.get(f"/v1/runs/run-1/rounds/{index}").json()["phase"])


def test_round_open_is_signed_by_coordinator(harness: Harness) -> None:
    env = _open(harness)
    verified = open_envelope(env, domain="round-open")
    assert verified.signer == harness.state.coordinator
    manifest = harness.client.get("/v1/runs/run-1/manifest").json()
    assert open_envelope(manifest, domain="manifest").signer == harness.state.coordinator
    assert len(env["body"]["roster"]) == 3
    assert env["body"]["commit_deadline_round"] == 103


def test_commit_rules_late_duplicate_roster(harness: Harness) -> None:
    h = harness
    _open(h)
    ok = h.client.post("/v1/commit", json=signed(h.miners[0], "commit", commit_body(0)))
    assert ok.status_code == 200, ok.text
    dup = h.client.post("/v1/commit", json=signed(h.miners[0], "commit", commit_body(0)))
    assert (dup.status_code, dup.json()["error"]) == (409, "duplicate")
    outsider = h.client.post("/v1/commit", json=signed(h.miners[3], "commit", commit_body(0)))
    assert (outsider.status_code, outsider.json()["error"]) == (403, "not_in_roster")
    bad = commit_body(0)
    bad["leaf_count"] = 9
    r = h.client.post("/v1/commit", json=signed(h.miners[1], "commit", bad))
    assert (r.status_code, r.json()["error"]) == (400, "bad_body")
    r = h.client.post("/v1/commit", json=signed(h.miners[1], "commit", commit_body(5)))
    assert (r.status_code, r.json()["error"]) == (404, "unknown_round")
    h.tick(3)  # now == deadline: still accepted
    assert (
        h.client.post("/v1/commit", json=signed(h.miners[1], "commit", commit_body(0))).status_code
        == 200
    )
    h.tick(1)  # past the deadline: selection happens at deadline + 1
    late = h.client.post("/v1/commit", json=signed(h.miners[2], "commit", commit_body(0)))
    assert (late.status_code, late.json()["error"]) == (409, "late")
    assert _phase(h) == "audit"
    assert h.client.get("/v1/runs/run-1/rounds").json()[0]["commits"] == 2


def test_full_phase_sequence_with_verdicts_and_merge(harness: Harness) -> None:
    h = harness
    _open(h)
    for key in h.miners[:2]:
        assert h.client.post("/v1/commit", json=signed(key, "commit", commit_body(0))).is_success
    early = h.client.post(
        "/worker/v1/merge", headers=bearer("worker"), json=signed(AGGREGATOR, "merge-tape", _tape())
    )
    assert (early.status_code, early.json()["error"]) == (409, "wrong_phase")
    h.tick(4)
    detail = h.client.get("/v1/runs/run-1/rounds/0").json()
    assert detail["phase"] == "audit" and detail["selection_beacon_round"] == 104
    assigned = h.client.get(
        "/worker/v1/runs/run-1/rounds/0/assignments", headers=bearer("worker")
    ).json()
    # both islands are in probation (first round), so both are audited, final segment always
    assert [a["body"]["hotkey"] for a in assigned] == sorted(k.ss58_address for k in h.miners[:2])
    for a in assigned:
        assert open_envelope(a, domain="audit-assignment").signer == h.state.coordinator
        assert a["body"]["segments"][-1] == 3 and len(a["body"]["segments"]) == 3
    expected = select_audits(
        run_id="run-1",
        round_index=0,
        beacon_round=104,
        randomness_hex=h.beacon.get(104).randomness,
        committed={k.ss58_address: True for k in h.miners[:2]},
        rate=0.5,
        segments_per_audit=2,
        num_segments=4,
    )
    assert [list(e.segments) for e in expected] == [a["body"]["segments"] for a in assigned]
    good, bad = assigned[0]["body"], assigned[1]["body"]
    verdicts = [
        {"round": 0, "hotkey": good["hotkey"], "segments": good["segments"], "result": "match"},
        {
            "round": 0,
            "hotkey": bad["hotkey"],
            "segments": bad["segments"],
            "result": "mismatch",
            "first_bad_leaf": bad["segments"][0] + 1,
        },
    ]
    ids = []
    for v in verdicts:
        r = h.client.post(
            "/worker/v1/verdict", headers=bearer("worker"), json=signed(h.auditor, "verdict", v)
        )
        assert r.status_code == 200, r.text
        ids.append(r.json()["verdict_id"])
    dup = h.client.post(
        "/worker/v1/verdict",
        headers=bearer("worker"),
        json=signed(h.auditor, "verdict", verdicts[0]),
    )
    assert (dup.status_code, dup.json()["error"]) == (409, "duplicate")
    assert h.ledger.faults == []  # the ledger burns against final rounds only
    gone = h.client.post("/v1/dispute", json=signed(h.miners[0], "verdict", verdicts[0]))
    assert gone.status_code in (404, 405)  # the free-text note is gone; /v1/disputes plays
    h.tick(2)  # audit window closes at selection + 2
    assert _phase(h) == "merge"
    late = h.client.post(
        "/worker/v1/verdict",
        headers=bearer("worker"),
        json=signed(h.auditor, "verdict", {**verdicts[0], "result": "mismatch"}),
    )
    assert late.status_code == 409
    tape = {**_tape(), **aggregator_split(h.client, "run-1", 0, _tape()["included"])}
    r = h.client.post(
        "/worker/v1/merge", headers=bearer("worker"), json=signed(AGGREGATOR, "merge-tape", tape)
    )
    assert r.status_code == 200, r.text
    assert _phase(h) == "settle"  # nothing is paid before the dispute window closes
    assert ("run-1", 0) not in h.ledger.settled
    h.tick(2)  # dispute deadline = audit close + 2 = 108; now 108
    assert _phase(h) == "settle"
    h.tick(1)
    assert _phase(h) == "final"
    assert h.ledger.settled[("run-1", 0)] == {good["hotkey"]: 1000}
    assert h.ledger.faults == [("run-1", 0, bad["hotkey"])]
    again = h.client.post(
        "/worker/v1/merge", headers=bearer("worker"), json=signed(AGGREGATOR, "merge-tape", _tape())
    )
    assert again.status_code == 409
    summary = h.client.get("/v1/runs/run-1").json()
    assert summary["accused_total"] == 1 and summary["tokens_total"] == 2000
    loss = h.client.get("/v1/runs/run-1/loss").json()
    assert loss == [{"round": 0, "train_loss": 3.5, "eval_loss": 3.25, "tokens": 2000}]
    roster = {i["hotkey"]: i for i in h.client.get("/v1/runs/run-1/roster").json()}
    assert roster[bad["hotkey"]]["status"] == "proven_fault"  # its round is final
    assert roster[good["hotkey"]]["escrow"] == 1000
    # the next round starts from the merged model by default
    nxt = h.client.post("/admin/v1/runs/run-1/rounds", headers=bearer("admin"), json={})
    assert nxt.status_code == 200, nxt.text
    assert nxt.json()["body"]["start_model_sha256"] == "bb" * 32


def test_round_without_commits_settles_at_audit_close(harness: Harness) -> None:
    h = harness
    _open(h)
    busy = h.client.post("/admin/v1/runs/run-1/rounds", headers=bearer("admin"), json={})
    assert (busy.status_code, busy.json()["error"]) == (409, "wrong_phase")
    h.tick(4)
    h.tick(2)
    assert _phase(h) == "final"
    assert h.ledger.settled[("run-1", 0)] == {}


def _tape() -> dict[str, Any]:
    return {
        "round": 0,
        "start_model_sha256": START,
        "new_model_sha256": "bb" * 32,
        "new_model_url": "http://relay/m1",
        "outer_state_sha256": "cc" * 32,
        "tape_sha256": "dd" * 32,
        "eval_loss": 3.25,
        "included": [k.ss58_address for k in MINERS[:2]],
    }
