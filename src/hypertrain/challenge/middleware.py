"""ASGI middleware: the platform proxy prefix, the request body limit, strict JSON, latency.

The platform reaches public routes at ``/challenge/<slug>/<path>``; the prefix is
stripped here so every route exists under both spellings (another slug is 404).
Bodies over the limit are refused with 413 before any route sees them. A JSON body
(the only bodies the routes parse as JSON: the app keeps FastAPI's strict content
type) must pass the protocol's one parser for untrusted JSON,
:func:`~hypertrain.protocol.canonical.parse_json` (no repeated key, no non-finite or
unsafe number, bounded depth), or it is refused with a typed 400 ``non_canonical_json``
before any route reads it: FastAPI's own parser keeps the last of two repeated keys,
where the relay and every other reader refuse them. Latency is
observed here (plain ASGI, cheaper than a per-request middleware object) per route
template and status.
"""

from __future__ import annotations

import json
import time

from prometheus_client import Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hypertrain.protocol.canonical import parse_json
from hypertrain.protocol.envelope import NON_CANONICAL
from hypertrain.protocol.errors import CanonicalJSONError


class PrefixAndLimitMiddleware:
    def __init__(
        self, app: ASGIApp, *, slug: str, max_body_bytes: int, latency: Histogram | None = None
    ) -> None:
        self.app = app
        self.latency = latency
        self.prefix = f"/challenge/{slug}"
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path.startswith("/challenge/"):
            if path != self.prefix and not path.startswith(self.prefix + "/"):
                await _error(send, 404, "not_found", "unknown challenge slug in the proxy path")
                return
            scope = dict(scope)
            scope["path"] = path[len(self.prefix) :] or "/"
            scope["raw_path"] = scope["path"].encode()
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await _error(send, 413, "too_large", f"body over {self.max_body_bytes} bytes")
            return
        body = b""
        more = scope["method"] not in ("GET", "HEAD")
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_body_bytes:
                await _error(send, 413, "too_large", f"body over {self.max_body_bytes} bytes")
                return
        if body and _is_json(scope):
            try:
                parse_json(body, max_bytes=self.max_body_bytes)
            except CanonicalJSONError as exc:
                await _error(send, 400, NON_CANONICAL, f"body: {exc}")
                return
        await self._timed(scope, _replay(body, receive), send)

    async def _timed(self, scope: Scope, receive: Receive, send: Send) -> None:
        start, status = time.perf_counter(), 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            if self.latency is not None:
                route = getattr(scope.get("route"), "path", "unmatched")
                self.latency.labels(route, str(status)).observe(time.perf_counter() - start)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive callable that yields the already-read body once, then defers."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _is_json(scope: Scope) -> bool:
    """A body the routes parse as JSON: ``application/json`` or ``application/*+json``
    (FastAPI's rule with a strict content type; no header is not JSON)."""
    for name, value in scope.get("headers", []):
        if name == b"content-type":
            media: bytes = value.split(b";", 1)[0].strip().lower()
            return media == b"application/json" or (
                media.startswith(b"application/") and media.endswith(b"+json")
            )
    return False


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _error(send: Send, status: int, code: str, detail: str) -> None:
    payload = {"error": code, "detail": detail}
    data = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
