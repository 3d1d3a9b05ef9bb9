"""The relay over real HTTP on loopback: happy paths and every refused upload."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import httpx
import pytest

from hypertrain.relay.auth import encode_authorization
from hypertrain.relay.client import RelayClient
from hypertrain.relay.clock import BeaconClock
from hypertrain.relay.errors import NotFoundError, RelayError
from tests.relay.conftest import Running
from tests.relay.helpers import NOW_ROUND, RUN_ID, Keys, blob_envelope


def _put(http: httpx.Client, relay: Running, data: bytes, auth: str, sha: str | None = None):
    sha = sha or hashlib.sha256(data).hexdigest()
    return http.put(f"{relay.url}/blobs/{sha}", content=data, headers={"authorization": auth})


def _stored(relay: Running) -> list[Path]:
    root = Path(relay.app.state.settings.storage) / "blobs"
    return sorted(p for p in root.rglob("*") if p.is_file())


def _spool_empty(relay: Running) -> bool:
    return not any(relay.relay.store.spool_dir.iterdir())


def test_put_get_head_roundtrip(relay: Running, keys: Keys) -> None:
    data = os.urandom(3 * (1 << 20) + 17)  # several client chunks
    with RelayClient(relay.url, keys.miner, RUN_ID) as client:
        sha = client.put(data, kind="update", round=3, expiry_round=NOW_ROUND + 5)
        assert sha == hashlib.sha256(data).hexdigest()
        assert client.exists(sha) == len(data)
        assert client.get(sha) == data
    assert [p.name for p in _stored(relay)] == [sha]
    assert _stored(relay)[0].parent.name == sha[2:4]  # fan-out directories


def test_get_response_headers_and_missing(relay: Running, keys: Keys, http: httpx.Client) -> None:
    data = b"immutable"
    sha = hashlib.sha256(data).hexdigest()
    assert _put(http, relay, data, encode_authorization(blob_envelope(keys.miner, data))).is_success
    resp = http.get(f"{relay.url}/blobs/{sha}")
    assert resp.content == data
    assert resp.headers["etag"] == f'"{sha}"'
    assert "immutable" in resp.headers["cache-control"]
    missing = "0" * 64
    assert http.head(f"{relay.url}/blobs/{missing}").status_code == 404
    resp = http.get(f"{relay.url}/blobs/{missing}")
    assert (resp.status_code, resp.json()["error"]) == (404, "not_found")
    assert http.get(f"{relay.url}/blobs/NOTAHASH").json()["error"] == "bad_hash"


def test_reupload_is_idempotent(relay: Running, keys: Keys, http: httpx.Client) -> None:
    data = b"same bytes twice"
    first = _put(http, relay, data, encode_authorization(blob_envelope(keys.miner, data)))
    again = _put(http, relay, data, encode_authorization(blob_envelope(keys.miner, data)))
    other = _put(http, relay, data, encode_authorization(blob_envelope(keys.other, data)))
    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 200)
    assert again.json()["created"] is False
    assert relay.relay.quota.used(keys.miner.ss58_address, relay.relay.quota_key()) == len(data)
    assert len(_stored(relay)) == 1


def test_put_from_file_and_get_to_file(relay: Running, keys: Keys, tmp_path: Path) -> None:
    src = tmp_path / "update.bin"
    src.write_bytes(os.urandom(1_500_000))
    with RelayClient(relay.url, keys.miner, RUN_ID) as client:
        sha = client.put(src, kind="checkpoint", round=3, expiry_round=NOW_ROUND + 5)
        out = client.get_to_file(sha, tmp_path / "out" / "copy.bin")
        with pytest.raises(NotFoundError):
            client.get("f" * 64)
    assert out.read_bytes() == src.read_bytes()
    assert [p.name for p in out.parent.iterdir()] == ["copy.bin"]


def _existing(relay: Running, keys: Keys, http: httpx.Client) -> tuple[bytes, str]:
    data = b"precious existing blob"
    assert _put(http, relay, data, encode_authorization(blob_envelope(keys.miner, data))).is_success
    return data, hashlib.sha256(data).hexdigest()


def _assert_unharmed(relay: Running, http: httpx.Client, data: bytes, sha: str) -> None:
    assert http.get(f"{relay.url}/blobs/{sha}").content == data
    assert len(_stored(relay)) == 1
    assert _spool_empty(relay)


def test_hash_mismatch_refused_existing_unharmed(
    relay: Running, keys: Keys, http: httpx.Client
) -> None:
    data, sha = _existing(relay, keys, http)
    forged = b"X" * len(data)  # same size, different bytes, announced under the old hash
    auth = encode_authorization(blob_envelope(keys.miner, forged, sha256=sha))
    resp = _put(http, relay, forged, auth, sha=sha)
    assert (resp.status_code, resp.json()["error"]) == (400, "hash_mismatch")
    fresh = b"Y" * 40
    wrong = hashlib.sha256(b"something else").hexdigest()
    auth = encode_authorization(blob_envelope(keys.miner, fresh, sha256=wrong))
    assert _put(http, relay, fresh, auth, sha=wrong).json()["error"] == "hash_mismatch"
    assert http.head(f"{relay.url}/blobs/{wrong}").status_code == 404
    _assert_unharmed(relay, http, data, sha)
    # the refused uploads were released from the round's accounting
    assert relay.relay.quota.used(keys.miner.ss58_address, relay.relay.quota_key()) == len(data)


def test_size_lies_refused(relay: Running, keys: Keys, http: httpx.Client) -> None:
    data, sha = _existing(relay, keys, http)
    body = b"z" * 100
    short = encode_authorization(blob_envelope(keys.miner, body, size=50))
    resp = _put(http, relay, body, short)
    assert (resp.status_code, resp.json()["error"]) == (400, "size_mismatch")
    long_auth = encode_authorization(blob_envelope(keys.miner, body, size=200))
    resp = _put(http, relay, body, long_auth)
    assert resp.json()["error"] == "size_mismatch"
    _assert_unharmed(relay, http, data, sha)


def test_oversize_and_round_quota(relay: Running, keys: Keys, http: httpx.Client) -> None:
    data, sha = _existing(relay, keys, http)
    big = b"b" * ((4 << 20) + 1)
    resp = _put(http, relay, big, encode_authorization(blob_envelope(keys.miner, big)))
    assert (resp.status_code, resp.json()["error"]) == (413, "blob_too_large")
    chunk = os.urandom(3 << 20)
    assert _put(
        http, relay, chunk, encode_authorization(blob_envelope(keys.miner, chunk))
    ).is_success
    more = os.urandom(3 << 20)
    resp = _put(http, relay, more, encode_authorization(blob_envelope(keys.miner, more)))
    assert (resp.status_code, resp.json()["error"]) == (413, "round_quota_exceeded")
    # claiming another (far-future) round does not open a fresh quota: the window is
    # the relay's own beacon round
    far = encode_authorization(blob_envelope(keys.miner, more, round_=10**9))
    resp = _put(http, relay, more, far)
    assert (resp.status_code, resp.json()["error"]) == (413, "round_quota_exceeded")
    # the limit is per quota window of the relay's clock and per hotkey
    window = relay.relay.quota_window_rounds
    relay.relay.clock = BeaconClock(genesis_unix=0, period_s=1, now=lambda: 1000.0 + window)
    later = blob_envelope(keys.miner, more, expiry_round=NOW_ROUND + window + 10)
    assert _put(http, relay, more, encode_authorization(later)).status_code == 201
    # coordinators are exempt
    coord = os.urandom(3 << 20)
    auth = encode_authorization(
        blob_envelope(keys.coordinator, coord, kind="model", expiry_round=later.expiry_round)
    )
    assert _put(http, relay, coord, auth).status_code == 201
    assert http.get(f"{relay.url}/blobs/{sha}").content == data


@pytest.mark.parametrize(
    ("case", "status", "reason"),
    [
        ("expired", 401, "expired"),
        ("too_far", 401, "expiry_too_far"),
        ("bad_signature", 401, "bad_signature"),
        ("unregistered", 403, "unknown_signer"),
        ("wrong_run", 403, "wrong_run"),
        ("wrong_domain", 400, "wrong_domain"),
        ("other_hash", 400, "hash_not_authorised"),
        ("no_header", 401, "missing_authorisation"),
        ("garbage", 400, "malformed"),
    ],
)
def test_bad_envelopes_refused(
    relay: Running, keys: Keys, http: httpx.Client, case: str, status: int, reason: str
) -> None:
    data, sha = _existing(relay, keys, http)
    body = b"new upload"
    env = {
        "expired": lambda: blob_envelope(keys.miner, body, expiry_round=NOW_ROUND - 1),
        "too_far": lambda: blob_envelope(keys.miner, body, expiry_round=NOW_ROUND + 10_000),
        "unregistered": lambda: blob_envelope(keys.stranger, body),
        "wrong_run": lambda: blob_envelope(keys.miner, body, run_id="run-2"),
        "wrong_domain": lambda: blob_envelope(keys.miner, body, domain="commit"),
        "other_hash": lambda: blob_envelope(keys.miner, body, sha256=sha, size=len(body)),
    }
    if case == "bad_signature":
        good = blob_envelope(keys.miner, body)
        auth = encode_authorization(good.model_copy(update={"expiry_round": NOW_ROUND + 20}))
    elif case == "no_header":
        auth = ""
    elif case == "garbage":
        auth = "Envelope !!!not-base64!!!"
    else:
        auth = encode_authorization(env[case]())
    target = sha if case == "other_hash" else None
    resp = _put(
        http, relay, body, auth, sha=hashlib.sha256(body).hexdigest() if not target else None
    )
    assert (resp.status_code, resp.json()["error"]) == (status, reason)
    assert http.head(f"{relay.url}/blobs/{hashlib.sha256(body).hexdigest()}").status_code == 404
    _assert_unharmed(relay, http, data, sha)


def test_replayed_envelope_refused(relay: Running, keys: Keys, http: httpx.Client) -> None:
    data = b"once only"
    auth = encode_authorization(blob_envelope(keys.miner, data))
    assert _put(http, relay, data, auth).status_code == 201
    resp = _put(http, relay, data, auth)
    assert (resp.status_code, resp.json()["error"]) == (409, "replayed")


def test_client_reports_refusal(relay: Running, keys: Keys) -> None:
    with RelayClient(relay.url, keys.stranger, RUN_ID) as client, pytest.raises(RelayError) as info:
        client.put(b"nope", kind="update", round=1, expiry_round=NOW_ROUND + 1)
    assert (info.value.reason, info.value.status) == ("unknown_signer", 403)


def test_healthz(relay: Running, http: httpx.Client) -> None:
    assert http.get(f"{relay.url}/healthz").json() == {
        "ok": True,
        "upstream": None,
        "beacon_round": NOW_ROUND,
    }
