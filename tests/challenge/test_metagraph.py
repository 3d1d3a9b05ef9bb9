"""Metagraph providers: the master's route on loopback, snapshot checks, stale handling."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from hypertrain.challenge.errors import MetagraphError
from hypertrain.challenge.metagraph import (
    MasterMetagraph,
    MetagraphView,
    Snapshot,
    departures,
    parse_snapshot,
)
from hypertrain.protocol.identity import Hotkey

KEY = Hotkey.from_seed(b"\x09" * 32).ss58_address


class _Master(BaseHTTPRequestHandler):
    answer: ClassVar[tuple[int, Any]] = (503, {"error": "none yet"})

    def do_GET(self) -> None:
        status, doc = self.answer if self.path == "/v1/metagraph/latest" else (404, {})
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def master() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Master)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_master_provider_and_view(master: str) -> None:
    view = MetagraphView(MasterMetagraph(master, 100))
    _Master.answer = (503, {"error": "none yet"})
    assert asyncio.run(view.refresh()) is None and view.snapshot is None
    assert "no metagraph yet" in view.last_error
    _Master.answer = (200, {"epoch": 5, "block": 9, "netuid": 100, "hotkeys": {KEY: 3}})
    snap = asyncio.run(view.refresh())
    assert snap is not None and snap.hotkeys == {KEY: 3} and view.is_registered(KEY)
    _Master.answer = (200, {"epoch": 4, "block": 9, "netuid": 100, "hotkeys": {}})
    assert asyncio.run(view.refresh()) is None
    assert view.stale and view.is_registered(KEY)  # epoch went back: keep the last good one
    unreachable = MetagraphView(MasterMetagraph("http://127.0.0.1:9", 100, timeout_s=1))
    assert asyncio.run(unreachable.refresh()) is None and "unreachable" in unreachable.last_error


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"epoch": 1, "block": 1, "netuid": 7, "hotkeys": {}}, "netuid 7"),
        ({"epoch": 1, "block": 1, "netuid": 100, "hotkeys": {"bad": 1}}, "SS58"),
        ({"epoch": 1, "block": 1, "netuid": 100, "hotkeys": {KEY: -1}}, "out of range"),
        ({"epoch": -1, "block": 1, "netuid": 100, "hotkeys": {}}, "epoch"),
        ([], "snapshot"),
    ],
)
def test_bad_snapshots_are_refused(doc: Any, message: str) -> None:
    with pytest.raises(MetagraphError, match=message):
        parse_snapshot(doc, netuid=100)


OTHER = Hotkey.from_seed(b"\x0a" * 32).ss58_address
# (old uids, new uids) -> who left: gone, or registered again under another uid
DEPARTURES: list[tuple[str, dict[str, int], dict[str, int], dict[str, int | None]]] = [
    ("unchanged", {KEY: 0, OTHER: 1}, {KEY: 0, OTHER: 1}, {}),
    ("gone", {KEY: 0, OTHER: 1}, {OTHER: 1}, {KEY: None}),
    ("registered again under a new uid", {KEY: 0}, {KEY: 3}, {KEY: 3}),
    ("its uid taken by another hotkey", {KEY: 0}, {OTHER: 0, KEY: 5}, {KEY: 5}),
    ("a newcomer is no departure", {KEY: 0}, {KEY: 0, OTHER: 1}, {}),
]


@pytest.mark.parametrize(("case", "old", "new", "left"), DEPARTURES, ids=[c[0] for c in DEPARTURES])
def test_departures(
    case: str, old: dict[str, int], new: dict[str, int], left: dict[str, int | None]
) -> None:
    assert departures(Snapshot(1, 1, 100, old), Snapshot(2, 2, 100, new)) == left, case
