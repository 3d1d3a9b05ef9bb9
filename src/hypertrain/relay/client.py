"""``RelayClient``: upload and download blobs, always verifying hashes.

Uploads stream from bytes or a file in bounded chunks and are idempotent: the client
asks first whether the relay already holds the blob, and every retry after a transport
error or a 5xx answer signs a fresh envelope (each envelope is accepted once).
Downloads are re-hashed before they are returned or renamed into place, so a relay
can lose data but never substitute it.

Downloads go through the standard library's ``http.client`` reading 1 MiB at a time
(about three times the throughput of httpx's small reads on a large blob); a client
built with a custom httpx ``transport`` (tests, proxies) downloads through httpx instead.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, Literal

import httpx
from pydantic import ValidationError

from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import BlobPut
from hypertrain.protocol.retry import Backoff, retry
from hypertrain.relay.arrival import ARRIVAL_HEADER, parse_arrival
from hypertrain.relay.auth import BLOB_PUT_DOMAIN, encode_authorization
from hypertrain.relay.errors import HashMismatchError, NotFoundError, RelayError
from hypertrain.relay.models import RelayHealth, receipt_problem
from hypertrain.relay.spool import CHUNK_BYTES, sha256_file, validate_sha256, write_all

log = logging.getLogger(__name__)

BlobKind = Literal["update", "checkpoint", "model", "outer_state", "tape", "other"]
RETRY_STATUSES: Final = frozenset({500, 502, 503, 504})
# Uploads are read from disk in CHUNK_BYTES pieces; downloads arrive in the HTTP stack's
# (small) reads and are written out WRITE_BYTES at a time.
WRITE_BYTES: Final = 4 << 20


class RelayClient:
    """A client for one relay; ``key`` is needed only to upload."""

    def __init__(
        self,
        base_url: str,
        key: Hotkey | None,
        run_id: str,
        *,
        timeout_s: float = 60.0,
        attempts: int = 4,
        backoff_s: float = 0.5,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.key = key
        self.run_id = run_id
        self._policy = Backoff(max(1, attempts), backoff_s)
        self._sleep = sleep
        self._timeout_s = timeout_s
        self._stdlib_downloads = transport is None
        self._http = httpx.Client(timeout=timeout_s, transport=transport)

    def __enter__(self) -> RelayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def url(self, sha256: str) -> str:
        """Where the blob ``sha256`` is served by this relay."""
        return f"{self.base_url}/blobs/{validate_sha256(sha256)}"

    def _head(self, sha256: str) -> httpx.Response | None:
        """The relay's HEAD answer for the blob (None: it does not hold it)."""
        resp = self._retrying(lambda: self._http.head(self.url(sha256)))
        if resp.status_code == 404:
            return None
        _raise_for(resp)
        return resp

    def exists(self, sha256: str) -> int | None:
        """The blob's size if the relay holds it, else None."""
        resp = self._head(sha256)
        return None if resp is None else int(resp.headers["content-length"])

    def held_at_origin(self, sha256: str, size: int) -> bool:
        """Whether the blob is held at ``size`` with an arrival record at the origin relay:
        what an audit counts (``auditor.uploads.check_arrival``). A regional relay's local
        copy whose forward upstream failed is not, so it is uploaded again (and forwarded)."""
        resp = self._head(sha256)
        if resp is None or int(resp.headers["content-length"]) != size:
            return False
        return parse_arrival(resp.headers.get(ARRIVAL_HEADER)) is not None

    def arrival_round(self, sha256: str) -> int | None:
        """The beacon round the blob first arrived at, by the relay's record (None: held
        without one); raises :class:`NotFoundError` when the relay does not hold it and
        :class:`~hypertrain.relay.errors.ArrivalError` on a malformed record."""
        resp = self._head(sha256)
        if resp is None:
            raise NotFoundError(sha256)
        return parse_arrival(resp.headers.get(ARRIVAL_HEADER))

    def beacon_round(self) -> int:
        """The relay's current beacon round (its ``/healthz``): the clock its arrival
        records are read on."""
        resp = self._retrying(lambda: self._http.get(f"{self.base_url}/healthz"))
        _raise_for(resp)
        try:
            health = RelayHealth.model_validate_json(resp.content)
        except ValidationError:
            raise RelayError(
                "bad_answer", f"{self.base_url}/healthz: not a health answer", 0
            ) from None
        if health.beacon_round is None:
            raise RelayError("no_clock", f"{self.base_url} publishes no beacon round", 0)
        return health.beacon_round

    def put(self, data: bytes | Path, *, kind: BlobKind, round: int, expiry_round: int) -> str:
        """Upload ``data`` (bytes or a file path); returns its SHA-256."""
        if self.key is None:
            raise RelayError("no_key", "uploading needs a hotkey", 0)
        if isinstance(data, Path):
            sha256, size = sha256_file(data)
        else:
            sha256, size = hashlib.sha256(data).hexdigest(), len(data)
        if self.held_at_origin(sha256, size):
            return sha256
        body = BlobPut(sha256=sha256, size=size, round=round, kind=kind).model_dump()

        def attempt() -> httpx.Response:
            assert self.key is not None
            env = seal(
                self.key, domain=BLOB_PUT_DOMAIN, run_id=self.run_id, body=body,
                expiry_round=expiry_round,
            )  # fmt: skip
            headers = {
                "authorization": encode_authorization(env),
                "content-type": "application/octet-stream",
                "content-length": str(size),
            }
            return self._http.put(self.url(sha256), content=_chunks(data), headers=headers)

        resp = self._retrying(attempt)
        _raise_for(resp)
        _check_stored(resp, sha256, size)
        return sha256

    def get(self, sha256: str, *, max_bytes: int = 1 << 32) -> bytes:
        """Download a blob into memory, verifying its hash."""
        digest = hashlib.sha256()
        parts: list[bytes] = []

        def sink(chunk: bytes) -> None:
            digest.update(chunk)
            parts.append(chunk)

        self._download(sha256, max_bytes, sink)
        _check(sha256, digest.hexdigest())
        return b"".join(parts)

    def get_to_file(self, sha256: str, path: Path, *, max_bytes: int = 1 << 40) -> Path:
        """Download a blob to ``path`` (atomically, after verifying its hash)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".part-", dir=path.parent)
        temp = Path(name)
        digest = hashlib.sha256()
        batch = _WriteBatch(fd)
        try:
            try:

                def sink(chunk: bytes) -> None:
                    digest.update(chunk)
                    batch.add(chunk)

                self._download(sha256, max_bytes, sink)
                batch.flush()
                os.fsync(fd)
            finally:
                os.close(fd)
            _check(sha256, digest.hexdigest())
            temp.replace(path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        return path

    def _download(self, sha256: str, max_bytes: int, sink: Callable[[bytes], None]) -> None:
        """Stream a blob into ``sink``; retried like uploads while no byte has arrived."""
        delivered = False

        def tracked(chunk: bytes) -> None:
            nonlocal delivered
            delivered = True
            sink(chunk)

        def once() -> None:
            try:
                if self._stdlib_downloads:
                    self._stream_stdlib(sha256, max_bytes, tracked)
                else:
                    self._stream(sha256, max_bytes, tracked)
            except (httpx.TransportError, http.client.HTTPException, OSError) as exc:
                raise RelayError("unreachable", f"{self.base_url}: {exc}", 0) from exc

        def again(exc: Exception) -> bool:
            return (
                not delivered
                and isinstance(exc, RelayError)
                and (exc.reason == "unreachable" or exc.status in RETRY_STATUSES)
            )

        retry(once, self._policy, retry_on=again, sleep=self._sleep, what=f"relay GET {sha256}")

    def _stream_stdlib(self, sha256: str, max_bytes: int, sink: Callable[[bytes], None]) -> None:
        parts = urllib.parse.urlsplit(self.url(sha256))
        factory = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        conn = factory(parts.hostname or "", parts.port, timeout=self._timeout_s)
        try:
            conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""))
            resp = conn.getresponse()
            if resp.status == 404:
                raise NotFoundError(sha256)
            if resp.status != 200:
                _raise_for_status(resp.status, resp.read(64 * 1024))
            buffer = memoryview(bytearray(CHUNK_BYTES))
            received = 0
            while n := resp.readinto(buffer):
                received += n
                if received > max_bytes:
                    raise RelayError("too_large", f"blob {sha256} exceeds {max_bytes} bytes")
                sink(bytes(buffer[:n]))
        finally:
            conn.close()

    def _stream(self, sha256: str, max_bytes: int, sink: Callable[[bytes], None]) -> None:
        url = self.url(sha256)
        with self._http.stream("GET", url) as resp:
            if resp.status_code == 404:
                raise NotFoundError(sha256)
            if resp.status_code != 200:
                resp.read()
                _raise_for(resp)
            received = 0
            for chunk in resp.iter_bytes():
                received += len(chunk)
                if received > max_bytes:
                    raise RelayError("too_large", f"blob {sha256} exceeds {max_bytes} bytes")
                sink(chunk)

    def _retrying(self, call: Callable[[], httpx.Response]) -> httpx.Response:
        try:
            return retry(
                call,
                self._policy,
                retry_on=lambda exc: isinstance(exc, httpx.TransportError),
                retry_if=lambda resp: resp.status_code in RETRY_STATUSES,
                sleep=self._sleep,
                what=f"relay {self.base_url}",
            )
        except httpx.TransportError as exc:
            raise RelayError("unreachable", f"{self.base_url}: {exc}", 0) from exc


class _WriteBatch:
    """Gathers the small pieces a response arrives in into few large ``writev`` calls."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._chunks: list[bytes] = []
        self._size = 0

    def add(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._size += len(chunk)
        if self._size >= WRITE_BYTES:
            self.flush()

    def flush(self) -> None:
        write_all(self._fd, self._chunks)
        self._chunks, self._size = [], 0


def _chunks(data: bytes | Path) -> Iterator[bytes]:
    if isinstance(data, Path):
        with data.open("rb") as handle:
            while chunk := handle.read(CHUNK_BYTES):
                yield chunk
        return
    view = memoryview(data)
    for start in range(0, len(view), CHUNK_BYTES):
        yield bytes(view[start : start + CHUNK_BYTES])


def _check(expected: str, actual: str) -> None:
    if actual != expected:
        raise HashMismatchError(expected, actual)


def _check_stored(resp: httpx.Response, sha256: str, size: int) -> None:
    """The relay's acknowledgement must name the blob that was sent, at its size."""
    problem = receipt_problem(resp.content, sha256, size)
    if problem is not None:
        raise RelayError("bad_answer", f"relay answered {problem}", resp.status_code)


def _raise_for(resp: httpx.Response) -> None:
    if resp.status_code in (200, 201):
        return
    _raise_for_status(resp.status_code, resp.content)


def _raise_for_status(status: int, body: bytes) -> None:
    """Raise the relay's own error (``{"error", "detail"}``) or a generic one."""
    try:
        doc = json.loads(body)
        reason, detail = str(doc["error"]), str(doc["detail"])
    except (ValueError, KeyError, TypeError):
        reason, detail = "http_error", body[:300].decode("utf-8", "replace")
    raise RelayError(reason, f"relay answered {status}: {detail}", status)
