"""``ChallengeClient``: the routes of every role, tokens, verified manifest, typed errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from tests.challenge.dispute_scenario import started
from tests.challenge.helpers import TOKENS, manifest_doc

URL = "http://testserver"


def _mocked(answer: Any, sent: list[httpx.Request] | None = None) -> ChallengeClient:
    """A client whose every request gets ``answer`` (a response, or an exception to raise)."""

    def handler(request: httpx.Request) -> httpx.Response:
        if sent is not None:
            sent.append(request)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, httpx.Response)
        return answer

    return ChallengeClient(URL, transport=httpx.MockTransport(handler))


def _manifest_envelope(signer: Hotkey, coordinator: str) -> dict[str, Any]:
    body = {"manifest": {**manifest_doc(), "coordinator": coordinator}}
    return seal(
        signer, domain="manifest", run_id="run-1", body=body, expiry_round=10**9
    ).model_dump()


def test_public_worker_and_admin_routes(tmp_path: Path) -> None:
    with started(tmp_path, manifest_doc()) as service:  # the real service, run-1 created
        coordinator = service.client.app.state.service.coordinator  # type: ignore[attr-defined]
        tokens = {"worker_token": TOKENS["worker"], "admin_token": TOKENS["admin"]}
        client = ChallengeClient(URL, http=service.client, **tokens)  # type: ignore[arg-type]
        manifest = client.manifest("run-1")
        assert isinstance(manifest, RunManifest) and manifest.run_id == "run-1"
        assert manifest.coordinator == coordinator
        assert client.manifest_envelope("run-1")["signer"] == manifest.coordinator  # as served
        assert client.beacon_round() == service.beacon.round
        assert client.run_summary("run-1").run_id == "run-1"
        assert client.rounds("run-1") == [] and client.roster("run-1") == []
        client.open_round("run-1", "aa" * 32, "http://relay/blobs/" + "aa" * 32)
        assert client.round_detail("run-1", 0).open.body["round"] == 0
        assert client.assignments("run-1", 0) == []


def test_token_routes_refuse_before_sending() -> None:
    sent: list[httpx.Request] = []
    client = _mocked(httpx.Response(200, json={}), sent)
    env = seal(Hotkey.from_seed(b"\x01" * 32), domain="verdict", run_id="run-1", body={},
               expiry_round=1)  # fmt: skip
    with pytest.raises(ServiceError, match="needs the worker token"):
        client.verdict(env)
    with pytest.raises(ServiceError, match="needs the worker token"):
        client.post_merge(env)
    with pytest.raises(ServiceError, match="needs the worker token"):
        client.assignments("run-1", 0)
    with pytest.raises(ServiceError, match="needs the admin token"):
        client.open_round("run-1", None, None)
    assert sent == []


def test_refusals_carry_status_and_code() -> None:
    refused = _mocked(httpx.Response(409, json={"error": "duplicate", "detail": "seen it"}))
    with pytest.raises(ServiceError, match="HTTP 409: seen it") as exc:
        refused.rounds("run-1")
    assert (exc.value.status, exc.value.code) == (409, "duplicate")
    garbled = _mocked(httpx.Response(502, text="<html>bad gateway</html>"))
    with pytest.raises(ServiceError, match="bad gateway") as exc:
        garbled.rounds("run-1")
    assert (exc.value.status, exc.value.code) == (502, "")
    down = _mocked(httpx.ConnectError("connection refused"))
    with pytest.raises(ServiceError, match="connection refused") as exc:
        down.beacon_round()
    assert exc.value.status == 0
    with pytest.raises(ServiceError, match="not verified any beacon"):
        _mocked(httpx.Response(200, json={"round": None, "randomness": None})).beacon_round()


def test_an_answer_that_does_not_fit_its_model_is_refused() -> None:
    lying = _mocked(httpx.Response(200, json=[{"round": "zero", "phase": "train"}]))
    with pytest.raises(ServiceError, match="unexpected answer at 0"):
        lying.rounds("run-1")
    extra = _mocked(httpx.Response(200, json={"round": 3, "randomness": "ab", "more": 1}))
    with pytest.raises(ServiceError, match="unexpected answer at more"):
        extra.beacon_round()


def test_manifest_must_verify() -> None:
    coordinator, other = Hotkey.from_seed(b"\x02" * 32), Hotkey.from_seed(b"\x03" * 32)
    good = _manifest_envelope(coordinator, coordinator.ss58_address)
    assert _mocked(httpx.Response(200, json=good)).manifest("run-1").seed == 7
    with pytest.raises(ServiceError, match="does not verify"):
        _mocked(httpx.Response(200, json=good)).manifest("run-2")  # another run's manifest
    forged = {**good, "signature": "00" * 64}
    with pytest.raises(ServiceError, match="does not verify"):
        _mocked(httpx.Response(200, json=forged)).manifest("run-1")
    foreign = _manifest_envelope(other, coordinator.ss58_address)
    with pytest.raises(ServiceError, match="not signed by the coordinator"):
        _mocked(httpx.Response(200, json=foreign)).manifest("run-1")
