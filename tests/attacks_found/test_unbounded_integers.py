"""A signed envelope holding an integer past 2^53 crashes every signed route with HTTP 500.

docs/protocol.md (Canonical JSON): what is signed and hashed is RFC 8785 JSON in the I-JSON
subset, integers within +-(2**53 - 1). The challenge service parsed an envelope's body with
the ordinary JSON parser, and ``open_envelope`` computed the signing bytes unguarded: a body
holding ``2**53`` raised ``CanonicalJSONError`` out of every signed POST route, a 500. No
valid signature was needed (the bytes the signature covers could not even be formed).

Now a document canonical JSON cannot hold is no envelope: the model refuses it when it is
built, and the service answers a typed 400 (``non_canonical_json``). The property is fed
to every route whose request body is an envelope, read from the app's own OpenAPI schema so
a new route is covered without editing this test.

The same routes took a repeated JSON key (an outsider's finding, F4): FastAPI's parser keeps
the last value, where docs/protocol.md says the parser of untrusted input refuses it and the
relay does, so a forwarded or archived raw body could name another run or body than the one
the signature was checked against. Every JSON body now passes the protocol's one strict
parser first: a repeated key, at any depth of the body or in the envelope, is a typed 400.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hypertrain.challenge.app import create_app
from hypertrain.protocol.canonical import MAX_SAFE_INTEGER
from hypertrain.protocol.envelope import NON_CANONICAL, Envelope, decode_envelope, open_envelope
from hypertrain.protocol.errors import EnvelopeError
from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import (
    TOKENS,
    FakeLedger,
    SteppedBeacon,
    bearer,
    make_settings,
    manifest_doc,
)

SIGNER = Hotkey.from_seed(b"\x01" * 32)
ENVELOPE_SCHEMA = "#/components/schemas/Envelope"

# an integer canonical JSON cannot carry, anywhere in the body, at any depth
huge = st.one_of(
    st.integers(min_value=MAX_SAFE_INTEGER + 1, max_value=2**70),
    st.integers(min_value=-(2**70), max_value=-MAX_SAFE_INTEGER - 1),
)
keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
bodies = st.recursive(
    huge.map(lambda n: {"round": n}),
    lambda inner: st.one_of(
        st.builds(lambda k, v: {k: v, "segment": 1}, keys, inner),
        st.builds(lambda k, v: {k: [0, v]}, keys, inner),
    ),
    max_leaves=4,
)


def envelope(body: dict[str, Any], run_id: str = "run-1") -> dict[str, Any]:
    """The wire form with an unverifiable signature: none is needed to reach the check."""
    return {
        "version": 1,
        "domain": "commit",
        "run_id": run_id,
        "signer": SIGNER.ss58_address,
        "nonce": "nonce-0001",
        "expiry_round": 500,
        "body": body,
        "signature": "00" * 64,
    }


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings_ = make_settings(tmp_path, [SIGNER.ss58_address])
    app = create_app(settings_, beacon=SteppedBeacon(), ledger=FakeLedger())
    with TestClient(app, raise_server_exceptions=False) as c:
        created = c.post(
            "/admin/v1/runs", json={"manifest": manifest_doc()}, headers=bearer("admin")
        )
        assert created.status_code == 200, created.text
        yield c


def signed_routes(client: TestClient) -> list[str]:
    """Every POST route whose request body is an envelope, from the served schema."""
    paths = client.get("/openapi.json").json()["paths"]
    return [
        path
        for path, operations in paths.items()
        if operations.get("post", {})
        .get("requestBody", {})
        .get("content", {})
        .get("application/json", {})
        .get("schema", {})
        .get("$ref")
        == ENVELOPE_SCHEMA
    ]


def test_every_signed_route_refuses_an_integer_past_2_53_with_a_typed_400(
    client: TestClient,
) -> None:
    routes = signed_routes(client)
    assert len(routes) >= 7  # the seven of the finding, and every route added since

    @settings(max_examples=6, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(body=bodies)
    def refused(route: str, body: dict[str, Any]) -> None:
        token = TOKENS["worker" if route.startswith("/worker") else "internal"]
        r = client.post(
            route.replace("{dispute_id}", "ab" * 32),
            json=envelope(body),
            headers={"Authorization": f"Bearer {token}"},
        )
        assert r.status_code == 400, f"{route}: {r.status_code} {r.text[:200]}"
        assert r.json()["error"] == NON_CANONICAL, f"{route}: {r.text[:200]}"
        assert "I-JSON range" in r.json()["detail"]

    for route in routes:
        refused(route)


def test_the_envelope_itself_never_holds_a_non_canonical_number() -> None:
    """Built from a dict or unchecked, an envelope with ``2**53`` is refused by reason."""
    doc = envelope({"round": MAX_SAFE_INTEGER + 1})
    with pytest.raises(EnvelopeError) as decoded:
        decode_envelope(doc)
    assert decoded.value.reason == NON_CANONICAL
    unchecked = Envelope.model_construct(**doc)  # skips validation, as a careless caller may
    with pytest.raises(EnvelopeError) as opened:
        open_envelope(unchecked, domain="commit")
    assert opened.value.reason == NON_CANONICAL
    assert decode_envelope(envelope({"round": MAX_SAFE_INTEGER})).body["round"] == MAX_SAFE_INTEGER


# a JSON text with one object holding a repeated key, at some depth of the body
repeated = st.recursive(
    keys.map(lambda k: f'{{"{k}": "FORGED", "{k}": "real"}}'),
    lambda inner: st.one_of(
        st.builds(lambda k, v: f'{{"{k}": {v}, "segment": 1}}', keys, inner),
        st.builds(lambda k, v: f'{{"{k}": [0, {v}]}}', keys, inner),
    ),
    max_leaves=4,
)


def _post_raw(client: TestClient, route: str, raw: str) -> Any:
    token = TOKENS["worker" if route.startswith("/worker") else "internal"]
    return client.post(
        route.replace("{dispute_id}", "ab" * 32),
        content=raw.encode(),
        headers={"Authorization": f"Bearer {token}", "content-type": "application/json"},
    )


def _refused_as_repeated(route: str, r: Any) -> None:
    assert r.status_code == 400, f"{route}: {r.status_code} {r.text[:200]}"
    assert r.json()["error"] == NON_CANONICAL, f"{route}: {r.text[:200]}"
    assert "duplicate object key" in r.json()["detail"], f"{route}: {r.text[:200]}"


def test_every_signed_route_refuses_a_repeated_key_with_a_typed_400(client: TestClient) -> None:
    routes = signed_routes(client)
    assert len(routes) >= 7

    @settings(max_examples=4, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(body=repeated)
    def refused(route: str, body: str) -> None:
        text = json.dumps(envelope({"round": 0}))
        raw = text.replace('"body": {"round": 0}', f'"body": {body}')
        assert raw != text
        _refused_as_repeated(route, _post_raw(client, route, raw))

    for route in routes:
        refused(route)
        # at the envelope level: the signature covers one run, the raw bytes name two
        text = json.dumps(envelope({"reason": "real"}))
        _refused_as_repeated(route, _post_raw(client, route, '{"run_id": "other-run", ' + text[1:]))
        # through the platform's proxy prefix too
        slugged = f"/challenge/hypertrain{route}"
        _refused_as_repeated(slugged, _post_raw(client, slugged, '{"run_id": "x", ' + text[1:]))
