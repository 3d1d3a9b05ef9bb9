"""A regional relay in front of an upstream one: forwarding, verified caching."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
from fastapi import FastAPI

from hypertrain.relay.app import create_app
from hypertrain.relay.client import RelayClient
from hypertrain.relay.clock import BeaconClock
from hypertrain.relay.errors import RelayError
from tests.relay.conftest import Running
from tests.relay.helpers import NOW_ROUND, RUN_ID, Keys, make_settings

Serve = Callable[[FastAPI], Running]


def _pair(tmp_path: Path, keys: Keys, clock: BeaconClock, serve: Serve) -> tuple[Running, Running]:
    upstream = serve(create_app(make_settings(tmp_path / "up", keys), clock=clock))
    settings = make_settings(tmp_path / "region", keys, upstream=upstream.url)
    return upstream, serve(create_app(settings, clock=clock))


def test_put_is_forwarded_and_miss_is_cached(
    tmp_path: Path, keys: Keys, clock: BeaconClock, serve: Serve
) -> None:
    upstream, region = _pair(tmp_path, keys, clock, serve)
    data = os.urandom(2_000_000)
    with RelayClient(region.url, keys.miner, RUN_ID) as client:
        sha = client.put(data, kind="update", round=2, expiry_round=NOW_ROUND + 5)
    assert upstream.relay.store.size(sha) == len(data)
    # the upstream checked the uploader's own envelope and accounted it to the uploader
    assert upstream.relay.quota.used(keys.miner.ss58_address, upstream.relay.quota_key()) == len(
        data
    )

    model = os.urandom(700_000)
    with RelayClient(upstream.url, keys.coordinator, RUN_ID) as client:
        model_sha = client.put(model, kind="model", round=2, expiry_round=NOW_ROUND + 5)
    assert region.relay.store.size(model_sha) is None
    with RelayClient(region.url, None, RUN_ID) as client:
        assert client.exists(model_sha) == len(model)  # HEAD consults upstream
        assert client.get(model_sha) == model
    assert region.relay.store.size(model_sha) == len(model)  # cached after the miss


def test_upstream_refusal_is_reported(
    tmp_path: Path, keys: Keys, clock: BeaconClock, serve: Serve
) -> None:
    upstream = serve(create_app(make_settings(tmp_path / "up", keys, run_id="other"), clock=clock))
    region = serve(
        create_app(make_settings(tmp_path / "region", keys, upstream=upstream.url), clock=clock)
    )
    with RelayClient(region.url, keys.miner, RUN_ID, attempts=1) as client:
        try:
            client.put(b"abc", kind="update", round=1, expiry_round=NOW_ROUND + 5)
        except RelayError as exc:
            assert exc.reason == "upstream_failed" and "wrong_run" in exc.detail
        else:
            raise AssertionError("forward should fail")
    # stored locally regardless; a retry against a fixed upstream will forward it
    assert region.relay.store.size(hashlib.sha256(b"abc").hexdigest()) == 3


def test_lying_upstream_is_not_cached(
    tmp_path: Path, keys: Keys, clock: BeaconClock, serve: Serve
) -> None:
    wanted = hashlib.sha256(b"the real bytes").hexdigest()

    def liar(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"forged bytes!!")

    transport = httpx.MockTransport(liar)
    settings = make_settings(tmp_path / "region", keys, upstream="http://upstream.invalid")
    region = serve(
        create_app(settings, clock=clock, upstream_client=httpx.AsyncClient(transport=transport))
    )
    with httpx.Client() as http:
        resp = http.get(f"{region.url}/blobs/{wanted}")
    assert (resp.status_code, resp.json()["error"]) == (400, "hash_mismatch")
    assert region.relay.store.size(wanted) is None
    assert list(region.relay.store.spool_dir.iterdir()) == []


def test_relay_on_fsspec_storage(
    tmp_path: Path, keys: Keys, clock: BeaconClock, serve: Serve
) -> None:
    settings = make_settings(tmp_path / "s3ish", keys, storage=f"memory://relay-{uuid.uuid4().hex}")
    relay = serve(create_app(settings, clock=clock))
    data = os.urandom(1_200_000)
    with RelayClient(relay.url, keys.miner, RUN_ID) as client:
        sha = client.put(data, kind="checkpoint", round=1, expiry_round=NOW_ROUND + 5)
        assert client.get(sha) == data
