"""Relay test fixtures: fixed keys, a frozen beacon clock and relays on loopback."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from hypertrain.protocol.identity import Hotkey
from hypertrain.relay.app import create_app
from hypertrain.relay.clock import BeaconClock
from hypertrain.relay.service import Relay
from tests.relay.helpers import Keys, make_settings


@pytest.fixture(scope="session")
def keys() -> Keys:
    return Keys(*(Hotkey.from_seed(bytes([i]) * 32) for i in (1, 2, 3, 4)))


@pytest.fixture
def clock() -> BeaconClock:
    # genesis 0, period 1 s, now = 1000 s  ->  current round 1001
    return BeaconClock(genesis_unix=0, period_s=1, now=lambda: 1000.0)


@dataclass
class Running:
    url: str
    app: FastAPI
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def relay(self) -> Relay:
        relay: Relay = self.app.state.relay
        return relay

    def stop(self) -> None:
        """Shut the relay down as a signal would (its lifespan closes its stores)."""
        self.server.should_exit = True
        self.thread.join(timeout=10)
        assert not self.thread.is_alive(), "relay did not stop"


@pytest.fixture
def serve() -> Iterator[Callable[[FastAPI], Running]]:
    """Start apps under uvicorn on loopback; all are stopped at teardown."""
    running: list[Running] = []

    def start(app: FastAPI) -> Running:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline, "relay did not start"
            time.sleep(0.005)
        port = server.servers[0].sockets[0].getsockname()[1]
        running.append(Running(f"http://127.0.0.1:{port}", app, server, thread))
        return running[-1]

    yield start
    for each in running:
        each.server.should_exit = True
        each.thread.join(timeout=10)


@pytest.fixture
def relay(
    tmp_path: Path, keys: Keys, clock: BeaconClock, serve: Callable[[FastAPI], Running]
) -> Running:
    return serve(create_app(make_settings(tmp_path / "relay", keys), clock=clock))


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client
