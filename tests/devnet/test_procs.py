"""The devnet's supervisor restarts a child the way it started it, on the same socket."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

from hypertrain.devnet.chaos import ROLES, ChaosLoop, child_name, loop_for, target
from hypertrain.devnet.errors import DevnetError
from hypertrain.devnet.network import listen
from hypertrain.devnet.procs import Supervisor

# A server that answers every connection with its pid and the variable SAID.
SERVER = """
import os, socket, sys
sock = socket.socket(fileno=int(sys.argv[sys.argv.index("--fd") + 1]))
while True:
    conn, _ = sock.accept()
    conn.sendall(f"{os.getpid()} {os.environ['SAID']}".encode())
    conn.close()
"""


def ask(port: int) -> tuple[int, str]:
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
                pid, said = conn.recv(100).decode().split()
                return int(pid), said
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_a_restarted_server_serves_on_the_same_port_with_the_same_environment(
    tmp_path: Path,
) -> None:
    sup = Supervisor(tmp_path / "logs")
    sock = listen(0)
    port = sock.getsockname()[1]
    try:
        first = sup.start_server("server", [sys.executable, "-c", SERVER], sock, {"SAID": "hi"})
        pid, said = ask(port)
        assert (pid, said) == (first.process.pid, "hi")
        again = sup.restart("server")
        assert again is first and again.restarts == 1 and again.alive
        pid_2, said_2 = ask(port)
        assert pid_2 == again.process.pid != pid and said_2 == "hi"
        assert "restarted by the devnet" in again.tail()
    finally:
        sup.stop_all()
    assert sup.children_left() == 0 and sup.sockets == []


def test_a_killed_child_is_reaped_and_its_group_is_gone(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path / "logs")
    child = sup.start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
    sup.kill("sleeper")
    assert not child.alive and child.process.returncode == -9 and sup.children_left() == 0
    with pytest.raises(DevnetError, match="no child named 'nobody'"):
        sup.child("nobody")


def test_six_kills_of_the_chaos_loop_hit_every_role_once() -> None:
    loop = ChaosLoop(period_rounds=3, seed=11)
    assert sorted(loop.draw() for _ in ROLES) == sorted(ROLES)
    assert child_name("island") == "island-1" and child_name("service") == "service"
    assert loop_for(0, seed=1) is None  # --chaos-every 0: no chaos
    with pytest.raises(DevnetError, match="chaos period"):
        ChaosLoop(period_rounds=0, seed=1)


def test_a_kill_of_the_auditor_hits_the_first_auditor_still_running(tmp_path: Path) -> None:
    """In the rollback scenario the lying auditor leaves once barred: the jurors judge."""
    sup = Supervisor(tmp_path / "logs")
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    try:
        for name in ("auditor", "juror-1", "juror-2"):
            sup.start(name, sleep)
        assert target(sup, "auditor") == "auditor"
        sup.kill("auditor")
        assert target(sup, "auditor") == "juror-1" and target(sup, "witness") == "witness"
    finally:
        sup.stop_all()
