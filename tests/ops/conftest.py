"""Fixtures: a small real dataset (via the CLI) and a real challenge service on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from hypertrain.challenge.app import create_app
from hypertrain.cli import main
from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import FakeLedger, SteppedBeacon, make_settings

CORPUS_BYTES = 60_000


@pytest.fixture(scope="session")
def small_dataset(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset prepared with the operator's commands (tokenizer.json travels with it)."""
    tmp = tmp_path_factory.mktemp("opsdata")
    corpus = tmp / "corpus.txt"
    corpus.write_bytes((assets_dir / "tinyshakespeare.txt").read_bytes()[:CORPUS_BYTES])
    tok = tmp / "tokenizer.json"
    assert (
        main(["data", "train-tokenizer", str(corpus), "--vocab-size", "320", "--out", str(tok)])
        == 0
    )
    out = tmp / "dataset"
    args = ["data", "prepare", str(corpus), "--tokenizer", str(tok), "--seq-len", "16"]
    assert main([*args, "--out", str(out), "--samples-per-shard", "500"]) == 0
    return out


class LiveService:
    def __init__(
        self,
        url: str,
        admin_token: Path,
        beacon: SteppedBeacon,
        state_dir: Path,
        stop: Callable[[], None] = lambda: None,
        start: Callable[[], None] = lambda: None,
    ) -> None:
        self.url, self.admin_token, self.beacon = url, admin_token, beacon
        self.state_dir = state_dir
        self.stop = stop  # takes the service down (the port stops answering)
        self.start = start  # after stop: serves again, same address, settings and state


def _serve(app: Any, port: int) -> tuple[str, Callable[[], None]]:
    """``app`` under uvicorn on loopback ``port`` (0: any), up when this returns; its stop."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the same port again
    sock.bind(("127.0.0.1", port))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    else:
        raise AssertionError("the service did not start")

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()

    return url, stop


@pytest.fixture
def live_service(tmp_path: Path) -> Iterator[LiveService]:
    """The real service app under uvicorn on a loopback socket bound to port 0."""
    miners = [Hotkey.from_seed(bytes([i + 1]) * 32).ss58_address for i in range(2)]
    beacon = SteppedBeacon()
    settings = make_settings(tmp_path, miners)
    url, stop = _serve(create_app(settings, beacon=beacon, ledger=FakeLedger()), 0)
    stops = [stop]

    def start() -> None:
        app = create_app(settings, beacon=beacon, ledger=FakeLedger())
        stops.append(_serve(app, int(url.rsplit(":", 1)[1]))[1])

    def stop_all() -> None:
        for each in stops:
            each()

    live = LiveService(url, tmp_path / "secrets" / "admin.token", beacon, tmp_path / "state")
    live.stop, live.start = stop_all, start
    yield live
    stop_all()
