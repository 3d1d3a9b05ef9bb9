"""Admission: registered, unregistered, replayed, bad self-check, bad layout."""

from __future__ import annotations

from hypertrain.protocol.envelope import seal
from tests.challenge.conftest import Harness
from tests.challenge.helpers import join_body, signed


def test_registered_island_is_admitted_in_probation(harness: Harness) -> None:
    r = harness.client.post("/v1/join", json=signed(harness.miners[0], "join", join_body()))
    assert r.status_code == 200, r.text
    assert r.json()["first_round"] == 0
    assert r.json()["probation_until_round"] == 1
    roster = harness.client.get("/v1/runs/run-1/roster").json()
    assert roster[0]["status"] == "probation"


def test_unregistered_hotkey_is_refused(harness: Harness) -> None:
    r = harness.client.post("/v1/join", json=signed(harness.outsider, "join", join_body()))
    assert r.status_code == 403
    assert r.json()["error"] == "unregistered"
    assert harness.client.get("/v1/runs/run-1/roster").json() == []


def test_replayed_join_is_refused(harness: Harness) -> None:
    env = seal(
        harness.miners[0], domain="join", run_id="run-1", body=join_body(), expiry_round=50_000
    ).model_dump()
    assert harness.client.post("/v1/join", json=env).status_code == 200
    again = harness.client.post("/v1/join", json=env)
    assert again.status_code == 409
    assert again.json()["error"] == "replayed"


def test_second_join_with_new_nonce_is_duplicate(harness: Harness) -> None:
    key = harness.miners[0]
    assert harness.client.post("/v1/join", json=signed(key, "join", join_body())).status_code == 200
    r = harness.client.post("/v1/join", json=signed(key, "join", join_body()))
    assert r.status_code == 409
    assert r.json()["error"] == "already_joined"


def test_bad_selfcheck_hash_is_refused(harness: Harness) -> None:
    r = harness.client.post(
        "/v1/join", json=signed(harness.miners[1], "join", join_body("cd" * 32))
    )
    assert r.status_code == 403
    assert r.json()["error"] == "selfcheck_mismatch"


def test_devices_disagreeing_is_refused(harness: Harness) -> None:
    body = join_body(devices=2)
    body["devices"][1]["workload_hash"] = "cd" * 32
    r = harness.client.post("/v1/join", json=signed(harness.miners[1], "join", body))
    assert r.status_code == 403
    assert r.json()["error"] == "selfcheck_mismatch"


def test_unknown_class_memory_claim_and_layout_are_refused(harness: Harness) -> None:
    cases = []
    body = join_body()
    body["devices"][0]["device_class"] = "cuda:unknown"
    cases.append((body, "unknown_device_class"))
    body = join_body()
    body["devices"][0]["memory_bytes"] = (1 << 20) - 1  # below the smallest table
    cases.append((body, "bad_claim"))
    body = join_body()
    body["devices"][0]["memory_probe_ok"] = True  # the self-reported probe is gone
    r = harness.client.post("/v1/join", json=signed(harness.miners[2], "join", body))
    assert (r.status_code, r.json()["error"]) == (400, "bad_body")
    body = join_body()
    body["layout"]["micro_batch_size"] = 8
    cases.append((body, "bad_layout"))
    body = join_body()
    body["layout"]["dp_ranks"] = 2
    cases.append((body, "bad_layout"))
    for body, code in cases:
        r = harness.client.post("/v1/join", json=signed(harness.miners[2], "join", body))
        assert (r.status_code, r.json()["error"]) == (403, code)


def test_bad_signature_expired_and_wrong_domain(harness: Harness) -> None:
    env = signed(harness.miners[0], "join", join_body())
    env["body"]["endpoint"] = "tampered"
    r = harness.client.post("/v1/join", json=env)
    assert (r.status_code, r.json()["error"]) == (401, "bad_signature")
    r = harness.client.post(
        "/v1/join", json=signed(harness.miners[0], "join", join_body(), expiry=5)
    )
    assert (r.status_code, r.json()["error"]) == (400, "expired")
    r = harness.client.post("/v1/join", json=signed(harness.miners[0], "commit", join_body()))
    assert (r.status_code, r.json()["error"]) == (400, "wrong_domain")
    r = harness.client.post(
        "/v1/join", json=signed(harness.miners[0], "join", join_body(), run_id="nope")
    )
    assert (r.status_code, r.json()["error"]) == (404, "unknown_run")


def test_unknown_body_field_is_refused(harness: Harness) -> None:
    body = {**join_body(), "extra": 1}
    r = harness.client.post("/v1/join", json=signed(harness.miners[0], "join", body))
    assert r.status_code == 400
    assert "extra" in r.json()["detail"]
    env = {**signed(harness.miners[0], "join", join_body()), "unexpected": True}
    r = harness.client.post("/v1/join", json=env)
    assert r.status_code == 422
    assert "unexpected" in r.json()["detail"]
