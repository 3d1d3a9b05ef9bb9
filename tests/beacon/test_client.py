from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from hypertrain.beacon.bls import sign_round
from hypertrain.beacon.chain import QUICKNET
from hypertrain.beacon.client import BeaconClient
from hypertrain.beacon.errors import (
    BeaconUnavailableError,
    FutureRoundError,
    MalformedError,
    RoundNotAvailableError,
)
from hypertrain.beacon.local import local_chain
from tests.beacon.conftest import quicknet_server

PREFIX = f"/{QUICKNET.chain_hash_hex}"
OTHER_KEY = b"\x00" * 31 + b"\x2a"


def make_client(urls: list[str], **kwargs: Any) -> BeaconClient:
    options: dict[str, Any] = {"timeout_s": 2.0, "retries": 0, "backoff_s": 0.0}
    options.update(kwargs)
    return BeaconClient(urls, QUICKNET, **options)


def beacon_doc(vectors: dict[str, Any], index: int) -> dict[str, Any]:
    b = vectors["beacons"][index]
    return {"round": b["round"], "randomness": b["randomness"], "signature": b["signature"]}


def test_recorded_beacons_via_http(scripted_server: Any, vectors: dict[str, Any]) -> None:
    server = quicknet_server(scripted_server(), vectors)
    with make_client([server.url]) as client:
        assert client.info() == QUICKNET
        for b in vectors["beacons"]:
            assert client.get(b["round"]).randomness.hex() == b["randomness"]
        assert client.latest().round == vectors["beacons"][-1]["round"]


def test_cache_fetches_each_round_once(
    scripted_server: Any, vectors: dict[str, Any], tmp_path: Path
) -> None:
    server = quicknet_server(scripted_server(), vectors)
    cache = tmp_path / "beacons.sqlite"
    with make_client([server.url], cache_path=cache) as client:
        first = client.get(123)
        assert client.get(123) == first
    assert server.hits.count(f"{PREFIX}/public/123") == 1
    server.routes.clear()  # the endpoint now knows nothing; the cache file still does
    with make_client([server.url], cache_path=cache) as client:
        assert client.get(123) == first


def test_dead_first_endpoint_falls_back(
    scripted_server: Any, vectors: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    server = quicknet_server(scripted_server(), vectors)
    dead = "http://127.0.0.1:9"  # discard port: connection refused
    with caplog.at_level(logging.WARNING), make_client([dead, server.url]) as client:
        assert client.get(2).round == 2
    assert "endpoint_failed" in caplog.text and dead in caplog.text


def test_forged_answer_is_refused_and_next_endpoint_used(
    scripted_server: Any, vectors: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    liar = quicknet_server(scripted_server(), vectors)
    honest = quicknet_server(scripted_server(), vectors)
    forged = {**beacon_doc(vectors, 0), "round": 2}  # round 1's real signature, relabelled
    liar.set_json(f"{PREFIX}/public/2", forged)
    with caplog.at_level(logging.WARNING), make_client([liar.url, honest.url]) as client:
        assert client.get(2).randomness.hex() == vectors["beacons"][1]["randomness"]
    assert f"{PREFIX}/public/2" in honest.hits
    with make_client([liar.url]) as client, pytest.raises(BeaconUnavailableError, match="forged"):
        client.get(2)


def test_wrong_round_answer_is_refused(scripted_server: Any, vectors: dict[str, Any]) -> None:
    server = quicknet_server(scripted_server(), vectors)
    server.set_json(f"{PREFIX}/public/3", beacon_doc(vectors, 1))  # valid beacon of round 2
    with (
        make_client([server.url]) as client,
        pytest.raises(BeaconUnavailableError, match="wrong_round"),
    ):
        client.get(3)


def test_truncated_json_is_refused(scripted_server: Any, vectors: dict[str, Any]) -> None:
    server = quicknet_server(scripted_server(), vectors)
    server.set_raw(f"{PREFIX}/public/2", json.dumps(beacon_doc(vectors, 1)).encode()[:-7])
    with (
        make_client([server.url]) as client,
        pytest.raises(BeaconUnavailableError, match="malformed"),
    ):
        client.get(2)


def test_slow_endpoint_times_out(scripted_server: Any, vectors: dict[str, Any]) -> None:
    slow = quicknet_server(scripted_server(), vectors)
    fast = quicknet_server(scripted_server(), vectors)
    slow.set_json(f"{PREFIX}/public/2", beacon_doc(vectors, 1), held=True)  # never answers
    with (
        make_client([slow.url], timeout_s=1.0) as client,
        pytest.raises(BeaconUnavailableError, match="Timeout"),
    ):
        client.get(2)
    with make_client([slow.url, fast.url], timeout_s=1.0) as client:
        assert client.get(2).round == 2


def test_endpoint_of_another_chain_is_refused(
    scripted_server: Any, vectors: dict[str, Any]
) -> None:
    other = local_chain(OTHER_KEY, period_s=3, genesis_time=QUICKNET.genesis_time, beacon_id="x")
    server = quicknet_server(scripted_server(), vectors)
    server.set_json(f"{PREFIX}/info", other.to_json())
    with make_client([server.url]) as client:
        with pytest.raises(BeaconUnavailableError, match="wrong_chain"):
            client.get(2)
        with pytest.raises(BeaconUnavailableError, match="wrong_chain"):
            client.info()


def test_beacon_signed_by_another_key_is_refused(
    scripted_server: Any, vectors: dict[str, Any]
) -> None:
    server = quicknet_server(scripted_server(), vectors)
    signature = sign_round(OTHER_KEY, 2)
    server.set_json(f"{PREFIX}/public/2", {"round": 2, "signature": signature.hex()})
    with make_client([server.url]) as client, pytest.raises(BeaconUnavailableError, match="forged"):
        client.get(2)


def test_future_round_is_refused_without_asking(
    scripted_server: Any, vectors: dict[str, Any]
) -> None:
    server = quicknet_server(scripted_server(), vectors)
    last = vectors["beacons"][-1]
    clock = float(last["time_unix"] - 60)  # the local clock says the last round is a minute away
    with make_client([server.url], clock=lambda: clock) as client:
        with pytest.raises(FutureRoundError):
            client.get(last["round"])
        with pytest.raises(BeaconUnavailableError, match="future_round"):
            client.latest()
    assert f"{PREFIX}/public/{last['round']}" not in server.hits


def test_unpublished_round_is_not_available(scripted_server: Any, vectors: dict[str, Any]) -> None:
    server = quicknet_server(scripted_server(), vectors)
    server.set_json(f"{PREFIX}/public/5", {"error": "too early"}, status=425)
    with make_client([server.url]) as client:
        with pytest.raises(RoundNotAvailableError):
            client.get(5)
        with pytest.raises(MalformedError):
            client.get(0)


def test_retries_with_backoff(scripted_server: Any, vectors: dict[str, Any]) -> None:
    server = quicknet_server(scripted_server(), vectors)
    server.set_json(f"{PREFIX}/public/2", {"error": "overloaded"}, status=503)
    sleeps: list[float] = []
    with (
        make_client([server.url], retries=2, backoff_s=0.5, sleep=sleeps.append) as client,
        pytest.raises(BeaconUnavailableError, match="HTTP 503"),
    ):
        client.get(2)
    assert sleeps == [0.5, 1.0]
    assert server.hits.count(f"{PREFIX}/public/2") == 3


def test_latest_never_goes_backwards(scripted_server: Any, vectors: dict[str, Any]) -> None:
    server = quicknet_server(scripted_server(), vectors)
    with make_client([server.url]) as client:
        newest = client.latest()
        server.set_json(f"{PREFIX}/public/latest", beacon_doc(vectors, 0))  # a stale relay
        assert client.latest() == newest


def test_client_needs_endpoints() -> None:
    with pytest.raises(ValueError):
        BeaconClient([], QUICKNET)
