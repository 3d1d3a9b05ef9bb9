"""Fetch a model's files from the relay its miner named, within one overall deadline.

The ``base_url`` is the miner's: its server may answer at once and then send one byte
just inside every read timeout. A read timeout alone bounds nothing, so every download
of a model has one deadline for the whole transfer, derived from the model's declared
size: ``slack_s + size / min_rate_bytes_s`` seconds (:class:`FetchLimits`). It is
enforced below HTTP, on every socket operation: connecting, sending the request,
reading the headers and reading the body each wait at most until the deadline, so the
transfer ends by it whatever the server sends and however slowly. A model whose files
have not all arrived by then is refused with :class:`FetchDeadlineError`. (Resolving a
host name is the system resolver's, bounded by its own timeouts, not by the deadline.)

The download streams through httpx on a connection pool whose network backend caps
every operation's timeout with the time left (``_DeadlineBackend``). Each file may
carry at most its declared size and must hash to its declared SHA-256.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpcore
import httpx

from hypertrain.competition.submission import ModelFile, SubmissionError
from hypertrain.relay.spool import validate_sha256

MIB: Final = 1 << 20
READ_TIMEOUT_S: Final = 60.0  # each socket operation waits at most this (and the deadline)


@dataclass(frozen=True, slots=True)
class FetchLimits:
    """How fast a model's bytes must arrive: all of them within :meth:`deadline_s`."""

    min_rate_bytes_s: float = 1.0 * MIB
    slack_s: float = 30.0

    def __post_init__(self) -> None:
        if not self.min_rate_bytes_s > 0 or not self.slack_s >= 0:
            raise ValueError("the minimum fetch rate must be > 0 and the slack >= 0")

    def deadline_s(self, size: int) -> float:
        """Seconds allowed to fetch ``size`` declared bytes: slack plus size at the rate."""
        if size < 0:
            raise ValueError("a size is never negative")
        return self.slack_s + size / self.min_rate_bytes_s


class FetchDeadlineError(SubmissionError):
    """The model's files did not all arrive within the deadline of its declared size."""

    reason: Final = "fetch_deadline"

    def __init__(self, received: int, size: int, deadline_s: float) -> None:
        super().__init__(
            f"{self.reason}: {received} of the model's {size} declared bytes arrived within"
            f" its fetch deadline of {deadline_s:.3f} s"
        )
        self.received = received
        self.size = size
        self.deadline_s = deadline_s


@dataclass(frozen=True, slots=True)
class Deadline:
    """A point on the monotonic clock; :meth:`cap` bounds one operation's timeout by it."""

    at: float
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def after(cls, seconds: float, clock: Callable[[], float] = time.monotonic) -> Deadline:
        return cls(clock() + seconds, clock)

    def left(self) -> float:
        return self.at - self.clock()

    def cap(self, timeout: float | None) -> float:
        """``timeout`` shortened to the time left; past the deadline, a timeout at once."""
        left = self.left()
        if left <= 0:
            raise httpcore.TimeoutException("the fetch deadline has passed")
        return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every operation ends by the deadline."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._deadline.cap(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._deadline.cap(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        tls = self._inner.start_tls(ssl_context, server_hostname, self._deadline.cap(timeout))
        return _DeadlineStream(tls, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """TCP connections (no Unix sockets) whose streams end by the deadline."""

    def __init__(self, deadline: Deadline) -> None:
        self._inner = httpcore.SyncBackend()
        self._deadline = deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(
            host, port, self._deadline.cap(timeout), local_address, socket_options
        )
        return _DeadlineStream(stream, self._deadline)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("a model is fetched over TCP only")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(min(seconds, max(0.0, self._deadline.left())))


class _Body(httpx.SyncByteStream):
    def __init__(self, parts: Iterable[bytes]) -> None:
        self._parts = parts

    def __iter__(self) -> Iterator[bytes]:
        yield from self._parts

    def close(self) -> None:
        close = getattr(self._parts, "close", None)
        if close is not None:
            close()


class _DeadlineTransport(httpx.BaseTransport):
    """An httpx transport over an httpcore pool on :class:`_DeadlineBackend`."""

    def __init__(self, deadline: Deadline) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(), network_backend=_DeadlineBackend(deadline)
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.SyncByteStream)
        url = httpcore.URL(
            scheme=request.url.raw_scheme, host=request.url.raw_host,
            port=request.url.port, target=request.url.raw_path,
        )  # fmt: skip
        req = httpcore.Request(
            method=request.method, url=url, headers=request.headers.raw,
            content=request.stream, extensions=request.extensions,
        )  # fmt: skip
        resp = self._pool.handle_request(req)
        assert isinstance(resp.stream, Iterable)
        return httpx.Response(
            status_code=resp.status, headers=resp.headers, stream=_Body(resp.stream),
            extensions=resp.extensions,
        )  # fmt: skip

    def close(self) -> None:
        self._pool.close()


@dataclass(slots=True)
class _Progress:
    bytes: int = 0  # of the model's files received so far


def fetch_files(base_url: str, files: list[ModelFile], folder: Path, limits: FetchLimits) -> None:
    """Download every file (``base_url/blobs/<sha256>``) into ``folder`` by one deadline.

    Raises :class:`FetchDeadlineError` when the deadline of the files' declared total
    passes first, and :class:`SubmissionError` for any other failure (the server's
    status, a file longer than declared, bytes that do not hash to the declared SHA-256,
    any transport error).
    """
    size = sum(f.size for f in files)
    allowed = limits.deadline_s(size)
    deadline = Deadline.after(allowed)
    received = _Progress()
    try:
        transport = _DeadlineTransport(deadline)
        with httpx.Client(transport=transport, timeout=READ_TIMEOUT_S, trust_env=False) as http:
            for f in files:
                _fetch_one(http, f"{base_url.rstrip('/')}/blobs/", f, folder / f.name, received)
    except SubmissionError:
        raise
    except Exception as exc:  # the miner's server or URL: that model's refusal
        if deadline.left() <= 0:
            raise FetchDeadlineError(received.bytes, size, allowed) from None
        raise SubmissionError(f"the model's files could not be fetched: {exc}") from None


def _fetch_one(
    http: httpx.Client, prefix: str, file: ModelFile, path: Path, received: _Progress
) -> None:
    """Stream one file to ``path``: at most its size, then its hash checked."""
    digest, count = hashlib.sha256(), 0
    # one connection per file: a server that closes after each answer (as many do without
    # saying so) never meets a reused connection, so an honest model is not refused on a reset
    url = prefix + validate_sha256(file.sha256)
    with http.stream("GET", url, headers={"Connection": "close"}) as resp:
        if resp.status_code != 200:
            raise SubmissionError(
                f"the model's files could not be fetched: {file.name} answered {resp.status_code}"
            )
        with path.open("wb") as out:
            for chunk in resp.iter_raw():
                count += len(chunk)
                received.bytes += len(chunk)
                if count > file.size:
                    raise SubmissionError(f"{file.name} is longer than its {file.size} bytes")
                digest.update(chunk)
                out.write(chunk)
    if digest.hexdigest() != file.sha256:
        raise SubmissionError(f"{file.name} does not hash to its declared {file.sha256}")
