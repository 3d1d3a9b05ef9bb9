"""HTTP for the local beacon, with drand's routes and JSON.

Routes (each also under a ``/{chain_hash}`` prefix, as drand serves them):
``GET /info``, ``GET /public/latest``, ``GET /public/{round}``, plus ``GET /chains``.
A round that is not due answers 425 (Too Early); a prefix for another chain, 404.
The server is the standard library's threading HTTP server: it has five routes,
no request bodies, and starts in milliseconds, which the devnet and tests value.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from hypertrain.beacon.errors import FutureRoundError, RoundNotAvailableError
from hypertrain.beacon.local import LocalBeacon

logger = logging.getLogger(__name__)

_ROUTE: Final = re.compile(r"(?:/(?P<chain>[0-9a-f]{64}))?/(?P<rest>[A-Za-z0-9/]*)")
_ROUND: Final = re.compile(r"public/(?P<round>[0-9]{1,19})")


def route(beacon: LocalBeacon, path: str) -> tuple[int, Any]:
    """The (HTTP status, JSON document) answer for a GET of ``path``."""
    match = _ROUTE.fullmatch(path.split("?", 1)[0].rstrip("/") or "/")
    if match is None:
        return HTTPStatus.NOT_FOUND, {"error": "unknown path"}
    chain_hash = match.group("chain")
    if chain_hash is not None and chain_hash != beacon.chain.chain_hash_hex:
        return HTTPStatus.NOT_FOUND, {"error": f"unknown chain {chain_hash}"}
    rest = match.group("rest")
    try:
        if rest == "info":
            return HTTPStatus.OK, beacon.chain.to_json()
        if rest == "chains":
            return HTTPStatus.OK, [beacon.chain.chain_hash_hex]
        if rest == "public/latest":
            return HTTPStatus.OK, beacon.latest().to_json()
        round_match = _ROUND.fullmatch(rest)
        if round_match is not None:
            return HTTPStatus.OK, beacon.beacon(int(round_match.group("round"))).to_json()
    except FutureRoundError as exc:
        return HTTPStatus.TOO_EARLY, {"error": str(exc)}
    except RoundNotAvailableError as exc:
        return HTTPStatus.NOT_FOUND, {"error": str(exc)}
    return HTTPStatus.NOT_FOUND, {"error": "unknown path"}


def _handler_class(beacon: LocalBeacon) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "hypertrain-local-beacon"

        def do_GET(self) -> None:
            status, doc = route(beacon, self.path)
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("%s " + format, self.address_string(), *args)

    return Handler


class LocalBeaconServer:
    """The local beacon on a loopback (or given) address, served from a background thread.

    ``port=0`` picks a free port; :attr:`url` is the base URL clients use.
    """

    def __init__(self, beacon: LocalBeacon, host: str = "127.0.0.1", port: int = 0) -> None:
        self.beacon = beacon
        self._httpd = ThreadingHTTPServer((host, port), _handler_class(beacon))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def serve_forever(self) -> None:
        """Serve on the calling thread until :meth:`stop` (or an exception) ends it."""
        try:
            self._httpd.serve_forever(poll_interval=0.2)
        finally:
            self._httpd.server_close()

    def start(self) -> LocalBeaconServer:
        """Serve from a daemon thread; returns self."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> LocalBeaconServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
