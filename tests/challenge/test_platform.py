"""The platform contract, token auth on every non-miner route, proxy prefix, body limit."""

from __future__ import annotations

import pytest

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import WeightsPublic
from hypertrain.protocol.canonical import canonical_bytes
from tests.challenge.conftest import Harness
from tests.challenge.helpers import TOKENS, bearer, write_metagraph

SLUG = {"X-Platform-Challenge-Slug": "hypertrain"}


def test_health_and_version(harness: Harness) -> None:
    r = harness.client.get("/health")
    assert r.status_code == 200 and r.json()["ok"] is True
    v = harness.client.get("/version").json()
    assert v == {
        "slug": "hypertrain",
        "version": v["version"],
        "contract": 1,
        "capabilities": ["get_weights", "proxy_routes"],
    }


def test_get_weights_auth_and_persistence(harness: Harness) -> None:
    c = harness.client
    assert c.get("/internal/v1/get_weights?epoch=3").status_code == 401
    wrong = {"Authorization": "Bearer " + "x" * 32, **SLUG}
    assert c.get("/internal/v1/get_weights?epoch=3", headers=wrong).status_code == 401
    no_slug = c.get("/internal/v1/get_weights?epoch=3", headers=bearer("internal"))
    assert no_slug.status_code == 403
    other = {**bearer("internal"), "X-Platform-Challenge-Slug": "other"}
    assert c.get("/internal/v1/get_weights?epoch=3", headers=other).status_code == 403
    first = c.get("/internal/v1/get_weights?epoch=3", headers={**bearer("internal"), **SLUG})
    assert first.status_code == 200
    body = first.json()
    assert set(body) == {
        "challenge_slug",
        "epoch",
        "weights",
        "full_share_mass",
        "metadata",
        "computed_at",
    }
    harness.ledger.settled[("run-1", 0)] = {harness.miners[0].ss58_address: 5}
    again = c.get("/internal/v1/get_weights?epoch=3", headers={**bearer("internal"), **SLUG})
    assert again.content == first.content
    fresh = c.get("/internal/v1/get_weights?epoch=4", headers={**bearer("internal"), **SLUG})
    assert fresh.json()["weights"] == {harness.miners[0].ss58_address: 5}
    assert (
        c.get(
            "/internal/v1/get_weights?epoch=-1", headers={**bearer("internal"), **SLUG}
        ).status_code
        == 422
    )


def _protected_routes(harness: Harness) -> list[tuple[str, str]]:
    out = []
    for path, ops in harness.client.get("/openapi.json").json()["paths"].items():
        if path.startswith(("/admin", "/worker", "/internal")):
            concrete = path.replace("{run_id}", "run-1").replace("{round_index}", "0")
            out.extend((method.upper(), concrete + "?epoch=1") for method in ops)
    return out


@pytest.mark.parametrize("token", [None, "x" * 32, "worker", "admin", "internal"])
def test_token_auth_on_every_non_miner_route(harness: Harness, token: str | None) -> None:
    routes = _protected_routes(harness)
    assert len(routes) >= 7
    for method, path in routes:
        needed = (
            "admin"
            if path.startswith("/admin")
            else ("worker" if path.startswith("/worker") else "internal")
        )
        if token == needed:
            continue
        headers = {**SLUG}
        if token is not None:
            headers["Authorization"] = "Bearer " + TOKENS.get(token, token)
        r = harness.client.request(method, path, headers=headers, json={})
        assert r.status_code == 401, (method, path, token, r.text)
        assert r.json()["error"] == "unauthorized"


def test_routes_work_under_proxy_prefix(harness: Harness) -> None:
    c = harness.client
    assert c.get("/challenge/hypertrain/health").json()["ok"] is True
    assert c.get("/challenge/hypertrain/v1/runs").json()[0]["run_id"] == "run-1"
    assert c.get("/challenge/other/health").status_code == 404


def test_body_limit_and_error_bodies(harness: Harness) -> None:
    c = harness.client
    big = c.post(
        "/v1/join",
        content=b"{" + b" " * (1 << 20) + b"}",
        headers={"content-type": "application/json"},
    )
    assert big.status_code == 413 and big.json()["error"] == "too_large"
    bad = c.post("/v1/commit", content=b"not json", headers={"content-type": "application/json"})
    assert bad.status_code == 400 and bad.json()["error"] == "non_canonical_json"
    assert "malformed JSON" in bad.json()["detail"]  # the protocol's strict parser refused it
    missing = c.get("/v1/runs/nope")
    assert missing.status_code == 404 and "nope" in missing.json()["detail"]


def test_metrics_and_openapi(harness: Harness) -> None:
    harness.client.get("/health")
    text = harness.client.get("/metrics").text
    assert "hypertrain_challenge_rows" in text and "hypertrain_challenge_request_seconds" in text
    assert "/v1/commit" in harness.client.get("/openapi.json").json()["paths"]


def test_stale_metagraph_is_kept_and_reported(harness: Harness) -> None:
    state = harness.state
    assert state.settings.metagraph_file is not None
    state.settings.metagraph_file.write_text("{broken")
    harness.client.portal.call(state.metagraph.refresh)  # type: ignore[union-attr]
    health = harness.client.get("/health").json()
    assert health["ok"] is True and health["metagraph"]["stale"] is True
    assert state.metagraph.is_registered(harness.miners[0].ss58_address)
    write_metagraph(state.settings.metagraph_file, [harness.miners[1].ss58_address], epoch=2)
    harness.client.portal.call(state.metagraph.refresh)  # type: ignore[union-attr]
    assert not state.metagraph.is_registered(harness.miners[0].ss58_address)
    assert harness.client.get("/health").json()["metagraph"]["stale"] is False


def test_get_weights_through_the_client_is_the_typed_answer(harness: Harness) -> None:
    """The client parses the stored answer into the shared model; the bytes are the same."""
    harness.ledger.settled[("run-1", 0)] = {harness.miners[1].ss58_address: 7}
    client = ChallengeClient(
        "http://testserver", internal_token=TOKENS["internal"], http=harness.client
    )
    typed = client.get_weights(9, "hypertrain")
    raw = harness.client.get(
        "/internal/v1/get_weights?epoch=9", headers={**bearer("internal"), **SLUG}
    )
    assert typed == WeightsPublic.model_validate_json(raw.content)
    assert typed.weights == {harness.miners[1].ss58_address: 7} and typed.epoch == 9
    assert canonical_bytes(typed.model_dump(mode="json", exclude_none=True)) == raw.content
    with pytest.raises(ServiceError) as wrong_slug:
        client.get_weights(9, "other")
    assert wrong_slug.value.status == 403
    with pytest.raises(ServiceError, match="needs the internal token"):
        ChallengeClient("http://testserver", http=harness.client).get_weights(9, "hypertrain")
