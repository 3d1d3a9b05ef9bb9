"""The relay on a real S3 API (moto's server in its own process, on loopback), driven
through the relay's own HTTP API: upload, download, the first-arrival record, the quota,
a restart that still serves what it stored, and the store's S3-specific guarantees (no
temporary keys, a racing upload never replaces a stored object, a missing bucket is
refused at start)."""

from __future__ import annotations

import hashlib
import math
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
import fsspec
import httpx
import pytest
from fastapi import FastAPI

from hypertrain.relay.app import create_app
from hypertrain.relay.arrival import ARRIVAL_HEADER
from hypertrain.relay.auth import encode_authorization
from hypertrain.relay.client import RelayClient
from hypertrain.relay.clock import BeaconClock
from hypertrain.relay.errors import StorageError
from hypertrain.relay.spool import Spool
from hypertrain.relay.store import FsspecStore, blob_key
from tests.relay.conftest import Running
from tests.relay.helpers import RUN_ID, Keys, blob_envelope, make_settings
from tests.relay.s3server import moto_server, s3_environment

Serve = Callable[[FastAPI], Running]
PREFIX = "relay"
# 2.5 blobs of 1000 bytes per hotkey, in one quota window for the whole test
QUOTA: dict[str, Any] = {"max_round_bytes": 2500, "quota_window_rounds": 10**9}


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with moto_server(tmp_path_factory.mktemp("moto") / "server.log") as url:
        yield url


@dataclass
class Bucket:
    """A fresh bucket on the S3 server, and a plain boto3 client to look inside it."""

    name: str
    client: Any

    @property
    def url(self) -> str:
        return f"s3://{self.name}/{PREFIX}"

    def keys(self) -> list[str]:
        listed = self.client.list_objects_v2(Bucket=self.name)
        return sorted(item["Key"] for item in listed.get("Contents", []))

    def last_modified(self, sha256: str) -> datetime:
        head = self.client.head_object(Bucket=self.name, Key=f"{PREFIX}/{blob_key(sha256)}")
        stamp: datetime = head["LastModified"]
        return stamp

    def body(self, sha256: str) -> bytes:
        got = self.client.get_object(Bucket=self.name, Key=f"{PREFIX}/{blob_key(sha256)}")
        data: bytes = got["Body"].read()
        return data


def _forget_s3_clients() -> None:
    """Drop fsspec's cached S3 filesystems, as a new relay process starts without them."""
    fsspec.get_filesystem_class("s3").clear_instance_cache()


@pytest.fixture
def bucket(s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bucket]:
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in s3_environment(s3_endpoint, tmp_path).items():
        monkeypatch.setenv(name, value)
    _forget_s3_clients()
    client = boto3.client("s3")  # endpoint and credentials from the environment, as s3fs
    name = f"relay-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=name)
    yield Bucket(name, client)
    _forget_s3_clients()


@pytest.fixture
def wall() -> BeaconClock:
    """Real time (S3 stamps objects with its own clock), one round a second; one genesis
    for every relay of a test, as for every relay of a network."""
    return BeaconClock(genesis_unix=int(time.time()) - 1000, period_s=1)


def _relay(
    serve: Serve, root: Path, keys: Keys, bucket: Bucket, wall: BeaconClock, **kw: Any
) -> Running:
    settings = make_settings(root, keys, storage=bucket.url, **kw)
    return serve(create_app(settings, clock=wall))


def _put(relay: Running, key: Any, data: bytes) -> httpx.Response:
    expiry = relay.relay.clock.current_round() + 600
    auth = encode_authorization(blob_envelope(key, data, expiry_round=expiry))
    sha = hashlib.sha256(data).hexdigest()
    return httpx.put(
        f"{relay.url}/blobs/{sha}", content=data, headers={"authorization": auth}, timeout=30
    )


def test_upload_download_and_first_arrival_on_s3(
    tmp_path: Path, keys: Keys, serve: Serve, bucket: Bucket, wall: BeaconClock
) -> None:
    relay = _relay(serve, tmp_path, keys, bucket, wall)
    clock = relay.relay.clock
    data = os.urandom((3 << 20) + 17)  # several chunks each way
    before = time.time()
    with RelayClient(relay.url, keys.miner, RUN_ID) as client:
        sha = client.put(data, kind="update", round=3, expiry_round=clock.current_round() + 600)
        after = time.time()
        assert client.exists(sha) == len(data)
        assert client.get(sha) == data
        first = client.arrival_round(sha)
    # S3 keeps whole seconds: the record lies between the upload's start and end
    assert first is not None
    assert clock.round_at(math.floor(before)) <= first <= clock.round_at(after)
    assert bucket.keys() == [f"{PREFIX}/{blob_key(sha)}"]  # stored whole, no temporary key
    assert bucket.body(sha) == data
    stamp = bucket.last_modified(sha)

    time.sleep(1.1)  # a replaced object would now carry a later LastModified
    again = _put(relay, keys.other, data)
    assert (again.status_code, again.json()["created"]) == (200, False)
    got = httpx.get(f"{relay.url}/blobs/{sha}", timeout=30)
    assert got.content == data and got.headers[ARRIVAL_HEADER] == str(first)
    assert bucket.last_modified(sha) == stamp
    assert not any(relay.relay.store.spool_dir.iterdir())

    missing = "0" * 64
    assert httpx.head(f"{relay.url}/blobs/{missing}").status_code == 404
    assert httpx.get(f"{relay.url}/blobs/{missing}").json()["error"] == "not_found"


def test_the_quota_refuses_before_anything_reaches_s3(
    tmp_path: Path, keys: Keys, serve: Serve, bucket: Bucket, wall: BeaconClock
) -> None:
    relay = _relay(serve, tmp_path, keys, bucket, wall, **QUOTA)
    blobs = [os.urandom(1000) for _ in range(3)]
    assert [_put(relay, keys.miner, blob).status_code for blob in blobs[:2]] == [201, 201]
    refused = _put(relay, keys.miner, blobs[2])
    assert (refused.status_code, refused.json()["error"]) == (413, "round_quota_exceeded")
    assert len(bucket.keys()) == 2
    assert _put(relay, keys.other, blobs[2]).status_code == 201  # another hotkey's quota


def test_a_restarted_relay_serves_what_it_stored_in_s3(
    tmp_path: Path, keys: Keys, serve: Serve, bucket: Bucket, wall: BeaconClock
) -> None:
    first = _relay(serve, tmp_path / "relay", keys, bucket, wall, **QUOTA)
    blobs = {hashlib.sha256(b).hexdigest(): b for b in (os.urandom(1000), os.urandom(1000))}
    assert [_put(first, keys.miner, blob).status_code for blob in blobs.values()] == [201, 201]
    arrivals = {
        sha: httpx.head(f"{first.url}/blobs/{sha}").headers[ARRIVAL_HEADER] for sha in blobs
    }
    first.stop()
    _forget_s3_clients()

    again = _relay(serve, tmp_path / "relay", keys, bucket, wall, **QUOTA)
    for sha, data in blobs.items():
        got = httpx.get(f"{again.url}/blobs/{sha}", timeout=30)
        assert got.content == data and got.headers[ARRIVAL_HEADER] == arrivals[sha]
    # the quota lives in the state directory, so it survives the restart
    refused = _put(again, keys.miner, os.urandom(1000))
    assert (refused.status_code, refused.json()["error"]) == (413, "round_quota_exceeded")

    # a relay on another machine (an empty state directory) serves the same facts
    elsewhere = _relay(serve, tmp_path / "elsewhere", keys, bucket, wall)
    for sha, data in blobs.items():
        got = httpx.get(f"{elsewhere.url}/blobs/{sha}", timeout=30)
        assert got.content == data and got.headers[ARRIVAL_HEADER] == arrivals[sha]


class _Blind:
    """An fsspec filesystem that never sees an existing object: a racing upload that
    checked before the other one stored."""

    def __init__(self, fs: Any) -> None:
        self._fs = fs

    def exists(self, _path: str) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fs, name)


def test_a_racing_upload_never_replaces_the_stored_object(tmp_path: Path, bucket: Bucket) -> None:
    store = FsspecStore(bucket.url, tmp_path / "spool")
    assert store.exclusive_put
    data = b"first arrival" * 100
    sha = hashlib.sha256(data).hexdigest()

    def spooled() -> Path:
        spool = Spool(store.spool_dir, sha, len(data), 1 << 20)
        spool.write(data)
        return spool.finish()

    assert store.commit(sha, spooled()) is True
    stamp = bucket.last_modified(sha)
    time.sleep(1.1)
    store._fs = _Blind(store._fs)
    assert store.commit(sha, spooled()) is False  # the server answered 412
    assert bucket.last_modified(sha) == stamp and bucket.body(sha) == data
    assert bucket.keys() == [f"{PREFIX}/{blob_key(sha)}"]
    assert not any(store.spool_dir.iterdir())


def test_a_missing_bucket_is_refused_at_start(tmp_path: Path, bucket: Bucket) -> None:
    with pytest.raises(StorageError, match="cannot be reached"):
        FsspecStore(f"s3://{bucket.name}-missing/{PREFIX}", tmp_path / "spool")
