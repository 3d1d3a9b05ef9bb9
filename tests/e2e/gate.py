"""A beacon gate for network tests: real signed rounds, released when the test is ready.

:class:`BeaconGate` is a loopback HTTP proxy in front of a real (local) beacon. It
answers ``/public/latest`` with the round ``cap`` and refuses later rounds as "not yet"
(HTTP 404, as drand does), so the service's clock is the beacon's clock held back by the
test. :func:`gate_rounds` moves ``cap`` forward only when doing so cannot close a window
on an island or auditor that has not acted yet: no round closes its commits before every
island committed, nor its audits before every verdict is in. A slow machine then makes
the test slower, never wrong.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


class BeaconGate:
    """A proxy serving the upstream beacon's rounds up to ``cap`` only."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.cap = 0
        self._http = httpx.Client(timeout=10)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}"

    def real_latest(self, chain_hash: str) -> int:
        doc = self._http.get(f"{self.upstream}/{chain_hash}/public/latest").json()
        return int(doc["round"])

    def _answer(self, path: str) -> tuple[int, bytes]:
        head, _, which = path.rpartition("/public/")
        if head and which == "latest":
            path = f"{head}/public/{self.cap}"
        elif head and which.isdigit() and int(which) > self.cap:
            return 404, b'{"error": "not yet"}'
        r = self._http.get(self.upstream + path)
        return r.status_code, r.content

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        gate = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                try:
                    status, body = gate._answer(self.path)
                except httpx.HTTPError:
                    status, body = 502, b'{"error": "upstream"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._http.close()


def allowed_round(rounds: list[dict[str, Any]], islands: int, real: int) -> int:
    """The latest beacon round the service may see without closing a window early."""
    allowed = real
    for r in rounds:
        if r["phase"] == "train" and r["commits"] < islands:
            allowed = min(allowed, r["commit_deadline_round"])
        if r["phase"] == "audit" and sum(r["verdicts"].values()) < r["audits"]:
            allowed = min(allowed, r["audit_close_round"] - 1)
    return allowed


@contextmanager
def gate_rounds(
    gate: BeaconGate, chain_hash: str, service: str, run_id: str, islands: int
) -> Iterator[None]:
    """Move the gate's cap forward in a background thread while the block runs."""
    stop = threading.Event()
    gate.cap = gate.real_latest(chain_hash)

    def loop() -> None:
        with httpx.Client(base_url=service, timeout=10) as client:
            while not stop.wait(0.2):
                try:
                    real = gate.real_latest(chain_hash)
                    r = client.get(f"/v1/runs/{run_id}/rounds")
                    rounds = r.json() if r.status_code == 200 else []
                except (httpx.HTTPError, ValueError):
                    continue
                # one round per step: a round opened since the fetch keeps its window
                gate.cap = max(gate.cap, min(gate.cap + 1, allowed_round(rounds, islands, real)))

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)
