"""Child processes of the devnet: start with logs, watch, restart, and stop every one.

Each child runs in its own session (its own process group), so a terminal's Ctrl-C
reaches only the devnet, which then stops the children in reverse start order:
SIGTERM to the whole group, a grace period, then SIGKILL. ``children_left`` counts
groups that still have a live member afterwards; a clean exit leaves zero.

A child can be killed (SIGKILL to its group, as a crash or an out-of-memory kill would)
and restarted with the same command line, environment and inherited listening sockets
(:meth:`Supervisor.restart`): the supervisor keeps its own copy of each socket it hands
over, so a restarted server serves on the same port, and connections made while it is
down wait in the socket's backlog instead of being refused.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from hypertrain.devnet import interrupt
from hypertrain.devnet.errors import DevnetError

log = logging.getLogger(__name__)


def hypertrain_cmd(*args: str) -> list[str]:
    """The ``hypertrain`` command line run with this interpreter."""
    return [sys.executable, "-m", "hypertrain.cli", *args]


def python_cmd(module: str, *args: str) -> list[str]:
    """``python -m MODULE ARGS`` run with this interpreter (the operator's tooling)."""
    return [sys.executable, "-m", module, *args]


def miner_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "hypertrain.miner.cli", *args]


def honeypot_island_cmd(strategy: str, honest_rounds: int, *miner_args: str) -> list[str]:
    """``hypertrain-miner MINER-ARGS`` run through the operator's honeypot tooling."""
    head = [sys.executable, "-m", "hypertrain.honeypot.island", "--strategy", strategy]
    return [*head, "--honest-rounds", str(honest_rounds), "--", *miner_args]


@dataclass(frozen=True, slots=True)
class Launch:
    """How a child was started: enough to start it again the same way."""

    argv: tuple[str, ...]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    launch: Launch = field(default_factory=lambda: Launch((), {}))
    restarts: int = 0

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_for_line(self, needle: str, timeout_s: float) -> None:
        """Wait until the child's log holds ``needle``; fail if it dies or takes too long."""
        deadline = time.monotonic() + timeout_s
        while needle not in self.tail(1 << 20):
            if not self.alive:
                raise DevnetError(f"{self.name} exited while starting:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise DevnetError(f"{self.name} did not start within {timeout_s:.0f} s")
            interrupt.pause(0.2)

    def tail(self, chars: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


# Every child's pid, one line each as it starts: a devnet that was killed outright (no
# chance to stop its children, which run in their own sessions) leaves them running, and
# a devnet resuming on the same state directory stops them first (:func:`stop_stale`).
PIDS_FILE: Final = "pids.txt"


def stop_stale(log_dir: Path) -> int:
    """SIGKILL the process group of every child an earlier devnet on ``log_dir`` started
    that still runs a hypertrain command; how many were stopped."""
    path = log_dir / PIDS_FILE
    if not path.exists():
        return 0
    stopped = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        pid = int(line.split()[0])
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue  # gone (or no /proc to check: left alone)
        if b"hypertrain" not in cmdline or not _group_alive(pid):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
            stopped += 1
    deadline = time.monotonic() + 10.0
    for line in path.read_text(encoding="utf-8").splitlines():
        pid = int(line.split()[0])
        while _group_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
    path.unlink()
    return stopped


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Supervisor:
    """Starts children with their output in ``log_dir`` and stops them all on exit."""

    log_dir: Path
    children: list[Child] = field(default_factory=list)
    sockets: list[socket.socket] = field(default_factory=list)  # kept for restarts

    def start(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        pass_fds: Sequence[int] = (),
    ) -> Child:
        """Start a child; ``pass_fds`` (listening sockets) are inherited by it."""
        launch = Launch(tuple(argv), dict(env or {}), tuple(pass_fds))
        child = Child(name, self._spawn(name, launch), self.log_dir / f"{name}.log", launch)
        self.children.append(child)
        log.info("started %s (pid %d)", name, child.process.pid)
        return child

    def start_server(
        self, name: str, argv: Sequence[str], sock: socket.socket, env: Mapping[str, str] | None
    ) -> Child:
        """Start a server child that serves on ``sock`` (its fd number is appended to
        ``argv`` as ``--fd N``); the supervisor keeps the socket for restarts and closes
        it in :meth:`stop_all`."""
        self.sockets.append(sock)
        fd = sock.fileno()
        return self.start(name, [*argv, "--fd", str(fd)], env, pass_fds=(fd,))

    def _spawn(self, name: str, launch: Launch) -> subprocess.Popen[bytes]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **launch.env}
        with (self.log_dir / f"{name}.log").open("ab") as out:
            process = subprocess.Popen(
                list(launch.argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=full_env,
                start_new_session=True,
                pass_fds=launch.pass_fds,
            )
        with (self.log_dir / PIDS_FILE).open("a", encoding="utf-8") as pids:
            pids.write(f"{process.pid} {name}\n")  # a devnet killed outright leaves them
        return process

    def child(self, name: str) -> Child:
        """The child named ``name`` (its latest start)."""
        for child in reversed(self.children):
            if child.name == name:
                return child
        raise DevnetError(f"no child named {name!r}")

    def kill(self, name: str) -> Child:
        """SIGKILL ``name``'s whole process group, as a crash would, and reap it."""
        child = self.child(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.process.pid, signal.SIGKILL)
        child.process.wait()
        deadline = time.monotonic() + 10.0
        while _group_alive(child.process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        log.info("killed %s (pid %d)", name, child.process.pid)
        return child

    def restart(self, name: str) -> Child:
        """Kill ``name`` if it still runs, then start it again with the same command
        line, environment and listening sockets; its log goes on in the same file and
        it keeps its place in the stop order."""
        old = self.kill(name)
        with old.log_path.open("ab") as out:
            out.write(f"\n--- restarted by the devnet (restart {old.restarts + 1}) ---\n".encode())
        old.process = self._spawn(name, old.launch)
        old.restarts += 1
        log.info("restarted %s (pid %d)", name, old.process.pid)
        return old

    def check(self, ignore: Sequence[str] = ()) -> None:
        """Raise if a long-running child died (its log tail says why)."""
        for child in self.children:
            if child.name not in ignore and not child.alive and child.process.returncode != 0:
                raise DevnetError(
                    f"{child.name} exited with status {child.process.returncode}; "
                    f"last lines of {child.log_path}:\n{child.tail()}"
                )

    def stop(self, child: Child, grace_s: float = 5.0) -> None:
        pgid = child.process.pid
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
            if not _group_alive(pgid):
                break
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and _group_alive(pgid):
                if child.process.poll() is not None and not _group_alive(pgid):
                    break
                child.process.poll()
                time.sleep(0.05)
        try:
            child.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            log.warning("%s (pid %d) did not exit", child.name, pgid)

    def stop_all(self, keep: Sequence[str] = ()) -> None:
        for child in reversed(self.children):
            if child.name not in keep:
                self.stop(child)
        if not keep:  # every server is down: nothing will be restarted on these sockets
            for sock in self.sockets:
                sock.close()
            self.sockets.clear()

    def children_left(self) -> int:
        return sum(1 for c in self.children if c.alive or _group_alive(c.process.pid))
