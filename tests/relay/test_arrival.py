"""The arrival record: kept by both stores, never moved by a re-upload, published on
HEAD and on an origin relay's GET (a regional relay's HEAD: its upstream's), refused when
malformed."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from hypertrain.relay.app import create_app
from hypertrain.relay.arrival import ARRIVAL_HEADER, info_arrival, parse_arrival
from hypertrain.relay.client import RelayClient
from hypertrain.relay.clock import BeaconClock
from hypertrain.relay.errors import ArrivalError, NotFoundError
from hypertrain.relay.spool import Spool
from hypertrain.relay.store import BlobStore, FsspecStore, LocalStore
from tests.relay.conftest import Running
from tests.relay.helpers import RUN_ID, Keys, make_settings

DATA = b"arrival " * 500
SHA = hashlib.sha256(DATA).hexdigest()
Serve = Callable[[FastAPI], Running]


class Wall:
    """A wall clock the test moves by hand."""

    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


def _store_once(store: BlobStore) -> bool:
    spool = Spool(store.spool_dir, SHA, len(DATA), 1 << 20)
    spool.write(DATA)
    return store.commit(SHA, spool.finish())


def test_the_local_record_is_the_relay_clock_at_first_arrival_and_never_moves(
    tmp_path: Path,
) -> None:
    wall = Wall(5000.0)
    store = LocalStore(tmp_path / "blobs", now=wall)
    assert store.arrived(SHA) is None
    assert _store_once(store) is True
    assert store.arrived(SHA) == 5000.0
    wall.at = 9000.0
    assert _store_once(store) is False  # a re-upload is refused and moves nothing
    assert store.arrived(SHA) == 5000.0


def test_the_fsspec_record_is_the_back_end_s_and_never_moves(tmp_path: Path) -> None:
    store = FsspecStore(f"memory://arrival-{uuid.uuid4().hex}", tmp_path / "spool")
    assert store.arrived(SHA) is None
    assert _store_once(store) is True
    first = store.arrived(SHA)
    assert first is not None
    assert _store_once(store) is False
    assert store.arrived(SHA) == first


def test_fsspec_records_of_each_shape_are_read() -> None:
    s3 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert info_arrival({"LastModified": s3}) == s3.timestamp()
    assert info_arrival({"mtime": 12.5}) == 12.5
    assert info_arrival({"created": 7}) == 7.0
    assert info_arrival({"size": 3}) is None  # a back end that keeps no record
    assert info_arrival({"mtime": True}) is None


def test_a_malformed_record_is_a_typed_error() -> None:
    assert parse_arrival(None) is None
    assert parse_arrival("1234") == 1234
    for bad in ("", "-1", "12.5", "1e3", "0x10", "١٢", "9" * 17, "soon"):
        with pytest.raises(ArrivalError) as caught:
            parse_arrival(bad)
        assert caught.value.reason == "bad_arrival"


def _relay(tmp_path: Path, keys: Keys, serve: Serve, wall: Wall, **kw: object) -> Running:
    clock = BeaconClock(genesis_unix=0, period_s=1, now=wall)
    return serve(create_app(make_settings(tmp_path, keys, **kw), clock=clock))


def test_head_and_get_publish_the_first_arrival_round(
    tmp_path: Path, keys: Keys, serve: Serve
) -> None:
    wall = Wall(1000.0)  # beacon round 1001
    relay = _relay(tmp_path / "relay", keys, serve, wall)
    with RelayClient(relay.url, keys.miner, RUN_ID) as client:
        with pytest.raises(NotFoundError):
            client.arrival_round(SHA)
        client.put(DATA, kind="update", round=3, expiry_round=1010)
        assert client.arrival_round(SHA) == 1001
        wall.at = 1004.0  # round 1005: the same blob uploaded again
        client.put(DATA, kind="update", round=3, expiry_round=1010)
        assert client.arrival_round(SHA) == 1001
        assert client.beacon_round() == 1005
    got = httpx.get(f"{relay.url}/blobs/{SHA}")
    assert got.content == DATA and got.headers[ARRIVAL_HEADER] == "1001"


def test_a_regional_relay_publishes_its_upstream_s_record(
    tmp_path: Path, keys: Keys, serve: Serve
) -> None:
    wall = Wall(1000.0)
    upstream = _relay(tmp_path / "up", keys, serve, wall)
    region = _relay(tmp_path / "region", keys, serve, wall, upstream=upstream.url)
    data = os.urandom(10_000)
    with RelayClient(upstream.url, keys.coordinator, RUN_ID) as client:
        sha = client.put(data, kind="model", round=3, expiry_round=1010)
    wall.at = 1020.0
    with RelayClient(region.url, None, RUN_ID) as client:
        assert client.get(sha) == data  # cached by the region now, at round 1021
        assert client.arrival_round(sha) == 1001  # the origin's record, not the cache's
    served = httpx.get(f"{region.url}/blobs/{sha}")  # the cache, served without asking upstream
    assert served.content == data and ARRIVAL_HEADER not in served.headers


def test_a_relay_answering_a_malformed_record_is_refused() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={ARRIVAL_HEADER: "yesterday", "content-length": "0"})

    client = RelayClient("http://relay", None, RUN_ID, transport=httpx.MockTransport(handler))
    with pytest.raises(ArrivalError):
        client.arrival_round(SHA)
