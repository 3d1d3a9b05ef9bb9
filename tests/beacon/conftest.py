"""Fixtures for beacon tests: the real quicknet vectors and scripted loopback HTTP servers.

``ScriptedServer`` is a real HTTP server on 127.0.0.1 that answers each path from a
table of (status, body bytes, held) and counts hits, so tests can stage dead, slow,
lying or truncating endpoints without mocking httpx. A held reply is not sent until the
test ends, so "slow" never races the client's timeout, however loaded the machine is.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hypertrain.beacon.chain import QUICKNET


@dataclass
class Reply:
    status: int
    body: bytes
    held: bool = False


@dataclass
class ScriptedServer:
    routes: dict[str, Reply] = field(default_factory=dict)
    hits: list[str] = field(default_factory=list)
    url: str = ""
    released: threading.Event = field(default_factory=threading.Event)

    def set_json(self, path: str, doc: Any, status: int = 200, held: bool = False) -> None:
        self.routes[path] = Reply(status, json.dumps(doc).encode(), held)

    def set_raw(self, path: str, body: bytes, status: int = 200, held: bool = False) -> None:
        self.routes[path] = Reply(status, body, held)


def _handler(script: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            script.hits.append(self.path)
            reply = script.routes.get(self.path, Reply(404, b'{"error": "not found"}'))
            if reply.held:
                script.released.wait(timeout=120)
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def scripted_server() -> Iterator[Any]:
    """A factory of scripted servers; all are shut down at the end of the test."""
    started: list[ThreadingHTTPServer] = []
    scripts: list[ScriptedServer] = []

    def make() -> ScriptedServer:
        script = ScriptedServer()
        scripts.append(script)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}).start()
        started.append(httpd)
        host, port = httpd.server_address[:2]
        script.url = f"http://{host!s}:{port}"
        return script

    yield make
    for script in scripts:
        script.released.set()
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="session")
def vectors(assets_dir: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((assets_dir / "drand_quicknet_vectors.json").read_text())
    return doc


def quicknet_server(script: ScriptedServer, vectors: dict[str, Any]) -> ScriptedServer:
    """Stage a scripted server as an honest quicknet relay holding the recorded beacons."""
    prefix = f"/{QUICKNET.chain_hash_hex}"
    script.set_json(f"{prefix}/info", vectors["chain_info"])
    beacons = vectors["beacons"]
    for b in beacons:
        doc = {"round": b["round"], "randomness": b["randomness"], "signature": b["signature"]}
        script.set_json(f"{prefix}/public/{b['round']}", doc)
    last = beacons[-1]
    script.set_json(
        f"{prefix}/public/latest",
        {"round": last["round"], "randomness": last["randomness"], "signature": last["signature"]},
    )
    return script
