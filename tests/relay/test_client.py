"""RelayClient against scripted transports: retries, fresh nonces, hash checks."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import threading
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from hypertrain.relay.client import RelayClient
from hypertrain.relay.errors import HashMismatchError, NotFoundError, RelayError
from tests.relay.helpers import RUN_ID, Keys

DATA = b"payload " * 500
SHA = hashlib.sha256(DATA).hexdigest()


def _nonce(request: httpx.Request) -> str:
    token = request.headers["authorization"].split(" ", 1)[1]
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    return str(json.loads(raw)["nonce"])


def _client(handler, key=None, **kw) -> RelayClient:  # type: ignore[no-untyped-def]
    return RelayClient(
        "http://relay",
        key,
        RUN_ID,
        transport=httpx.MockTransport(handler),
        sleep=lambda s: None,
        **kw,
    )


def test_put_retries_with_fresh_envelopes(keys: Keys) -> None:
    nonces: list[str] = []
    bodies: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "HEAD":
            return httpx.Response(404)
        nonces.append(_nonce(request))
        bodies.append(request.read())
        if len(nonces) < 3:
            return httpx.Response(503)
        return httpx.Response(201, json=_receipt(SHA, len(DATA)))

    with _client(handler, keys.miner) as client:
        assert client.put(DATA, kind="update", round=1, expiry_round=9) == SHA
    assert len(set(nonces)) == 3
    assert bodies == [DATA] * 3


def _receipt(sha256: str, size: int) -> dict[str, object]:
    return {"sha256": sha256, "size": size, "created": True, "forwarded": False}


@pytest.mark.parametrize(
    "answer",
    [
        _receipt("0" * 64, len(DATA)),  # acknowledges another blob
        _receipt(SHA, len(DATA) - 1),  # at another size
        {"sha256": SHA},  # not a receipt
        {**_receipt(SHA, len(DATA)), "stored_forever": True},  # a field nobody agreed on
    ],
)
def test_a_receipt_for_anything_but_the_blob_sent_is_refused(
    keys: Keys, answer: dict[str, object]
) -> None:
    """A relay (or something in between) that acknowledges what was not sent is caught."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "HEAD":
            return httpx.Response(404)
        request.read()
        return httpx.Response(201, json=answer)

    with _client(handler, keys.miner) as client, pytest.raises(RelayError) as err:
        client.put(DATA, kind="update", round=1, expiry_round=9)
    assert err.value.reason == "bad_answer"


def test_put_skips_blob_already_held(keys: Keys) -> None:
    methods: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        methods.append(request.method)
        held = {"content-length": str(len(DATA)), "x-hypertrain-arrival-round": "7"}
        return httpx.Response(200, headers=held)

    with _client(handler, keys.miner) as client:
        assert client.put(DATA, kind="update", round=1, expiry_round=9) == SHA
        assert client.held_at_origin(SHA, len(DATA))
        assert not client.held_at_origin(SHA, len(DATA) + 1)  # another size: not this blob
    assert methods == ["HEAD", "HEAD", "HEAD"]


def test_put_sends_a_blob_held_without_an_arrival_record(keys: Keys) -> None:
    """A regional relay's local copy whose forward upstream failed has no arrival record at
    the origin (what an audit counts): the client uploads it again, so the relay forwards
    it, instead of trusting the local copy (found by an attacker review)."""
    methods: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        methods.append(request.method)
        if request.method == "HEAD":
            return httpx.Response(200, headers={"content-length": str(len(DATA))})
        receipt = {"sha256": SHA, "size": len(DATA), "created": False, "forwarded": True}
        return httpx.Response(200, json=receipt)

    with _client(handler, keys.miner) as client:
        assert not client.held_at_origin(SHA, len(DATA))
        assert client.put(DATA, kind="update", round=1, expiry_round=9) == SHA
    assert methods == ["HEAD", "HEAD", "PUT"]


def test_unreachable_and_no_key(keys: Keys) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with _client(handler, keys.miner, attempts=2) as client, pytest.raises(RelayError) as info:
        client.exists(SHA)
    assert info.value.reason == "unreachable"
    with _client(handler) as client, pytest.raises(RelayError) as info:
        client.get(SHA)  # a download fails with the same typed error
    assert info.value.reason == "unreachable"
    with _client(handler) as client, pytest.raises(RelayError) as info:
        client.put(DATA, kind="update", round=1, expiry_round=9)
    assert info.value.reason == "no_key"


def test_downloads_are_verified(tmp_path: Path) -> None:
    def tampering(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=DATA[:-1] + b"!")

    with _client(tampering) as client:
        with pytest.raises(HashMismatchError):
            client.get(SHA)
        with pytest.raises(HashMismatchError):
            client.get_to_file(SHA, tmp_path / "blob")
        with pytest.raises(RelayError) as info:
            client.get(SHA, max_bytes=10)
        assert info.value.reason == "too_large"
    assert list(tmp_path.iterdir()) == []


class _FixedAnswers(http.server.BaseHTTPRequestHandler):
    """Answers GET /blobs/<sha> from a table: (status, body) per sha."""

    table: ClassVar[dict[str, tuple[int, bytes]]] = {}

    def do_GET(self) -> None:
        status, body = self.table.get(self.path.rsplit("/", 1)[-1], (404, b"{}"))
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return


def test_stdlib_download_path_verifies_and_maps_errors(tmp_path: Path) -> None:
    other = hashlib.sha256(b"other").hexdigest()
    broken = hashlib.sha256(b"broken").hexdigest()
    _FixedAnswers.table = {
        SHA: (200, DATA),
        other: (200, b"not the other blob"),
        broken: (500, b'{"error": "storage", "detail": "disk on fire"}'),
    }
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FixedAnswers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with RelayClient(url, None, "r") as client:
            assert client.get(SHA) == DATA
            assert client.get_to_file(SHA, tmp_path / "blob").read_bytes() == DATA
            with pytest.raises(HashMismatchError):
                client.get_to_file(other, tmp_path / "other")
            with pytest.raises(NotFoundError):
                client.get(hashlib.sha256(b"absent").hexdigest())
            with pytest.raises(RelayError) as info:
                client.get(broken)
            assert (info.value.reason, info.value.status) == ("storage", 500)
            with pytest.raises(RelayError) as info:
                client.get(SHA, max_bytes=10)
            assert info.value.reason == "too_large"
    finally:
        server.shutdown()
        server.server_close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blob"]
    with RelayClient(url, None, "r", attempts=1) as client, pytest.raises(RelayError) as info:
        client.get(SHA)  # the server is gone
    assert info.value.reason == "unreachable"


def test_get_is_retried_like_put() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        if len(calls) == 1:
            raise httpx.ConnectError("refused", request=request)
        if len(calls) == 2:
            return httpx.Response(503)
        return httpx.Response(200, content=DATA)

    with _client(handler, attempts=3) as client:
        assert client.get(SHA) == DATA
    assert calls == ["GET"] * 3
    calls.clear()
    with _client(lambda r: httpx.Response(404)) as client, pytest.raises(RelayError):
        client.get(SHA)  # a missing blob is an answer, not a failure: never retried
