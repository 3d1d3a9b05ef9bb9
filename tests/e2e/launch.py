"""Process-launch helpers for network tests: listening sockets, children with logs, waits.

A server child never binds a port itself: the test binds port 0, keeps the socket and
hands its file descriptor over (``--fd``), so no other process can take the port between
choosing it and serving on it.

Every role runs as a real child process (``python -m hypertrain.cli ...`` or
``python -m hypertrain.miner.cli ...``) whose stdout/stderr go to ``<name>.log``;
:class:`Fleet` stops them all (terminate, then kill) when the test ends.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]


def listener() -> socket.socket:
    """A listening loopback socket on a free port, inheritable by children."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def port_of(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])


def wait_for(check: Callable[[], T | None], timeout_s: float, what: str, poll_s: float = 0.2) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = check()
        except (httpx.HTTPError, OSError, KeyError, ValueError):
            value = None
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def http_ok(url: str) -> bool:
    return httpx.get(url, timeout=1).status_code < 500


@dataclass
class Fleet:
    """The child processes of one test, each with its own log file."""

    log_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(
        self,
        name: str,
        args: list[str],
        env: dict[str, str] | None = None,
        sock: socket.socket | None = None,
    ) -> None:
        """Start a child; ``sock`` is handed over as ``--fd`` (appended to ``args``)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        fds = () if sock is None else (sock.fileno(),)
        extra = [] if sock is None else ["--fd", str(sock.fileno())]
        with (self.log_dir / f"{name}.log").open("ab") as log:
            self.procs[name] = subprocess.Popen(
                [sys.executable, *args, *extra],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                env={**self.env, **(env or {})},
                pass_fds=fds,
            )

    def hypertrain(
        self,
        name: str,
        *args: str,
        env: dict[str, str] | None = None,
        sock: socket.socket | None = None,
    ) -> None:
        self.start(name, ["-m", "hypertrain.cli", *args], env, sock)

    def miner(self, name: str, *args: str) -> None:
        self.start(name, ["-m", "hypertrain.miner.cli", *args])

    def events(self, name: str) -> Iterator[dict[str, Any]]:
        """The JSON lines a child printed so far."""
        path = self.log_dir / f"{name}.log"
        for line in path.read_text(errors="replace").splitlines() if path.exists() else []:
            if line.startswith("{"):
                try:
                    yield json.loads(line)
                except ValueError:
                    continue

    def check_alive(self, *names: str) -> None:
        for name in names:
            code = self.procs[name].poll()
            if code is not None:
                tail = (self.log_dir / f"{name}.log").read_text(errors="replace")[-3000:]
                raise AssertionError(f"{name} exited with {code}:\n{tail}")

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def tail(self, name: str, chars: int = 3000) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def wait_started(fleet: Fleet, names: tuple[str, ...] | list[str], timeout_s: float) -> None:
    """Wait until each named child printed its ``started`` event (it follows the run now).

    Start islands, then this, then the aggregator that opens round 0: the commit window
    then starts when every island is already waiting for the round."""

    def ready() -> bool:
        fleet.check_alive(*names)
        return all(any(e.get("event") == "started" for e in fleet.events(n)) for n in names)

    wait_for(ready, timeout_s, f"{', '.join(names)} to start", poll_s=0.3)
