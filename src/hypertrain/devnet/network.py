"""Starting the network's processes on loopback and waiting until each one answers.

The service and the relay never bind a port themselves: the devnet binds it (port 0 for
any free one) and hands the listening socket over (``--fd``), so no other process can take
the port between choosing it and serving on it; the devnet's supervisor keeps its copy,
so a server it restarts serves on the same port. The service takes
the port ``--port`` names; without one, ``DEFAULT_PORT`` or, when something else holds
that, any free port (the address is logged, and printed again with the dashboard's).
"""

from __future__ import annotations

import json
import logging
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from hypertrain.devnet import interrupt
from hypertrain.devnet.config import DEFAULT_PORT
from hypertrain.devnet.errors import DevnetError
from hypertrain.devnet.keys import Secrets
from hypertrain.devnet.procs import Child, Supervisor, hypertrain_cmd

HOST = "127.0.0.1"
log = logging.getLogger(__name__)


def listen(port: int = 0) -> socket.socket:
    """A listening socket on ``HOST:port`` (0: any free port), inheritable by a child."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        hint = " (--port 0 picks a free port)" if port else ""
        raise DevnetError(f"cannot listen on {HOST}:{port}: {exc}{hint}") from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def listen_for_service(port: int | None, preferred: int = DEFAULT_PORT) -> socket.socket:
    """The service's socket: on ``port`` when one is given (taken: an error naming
    ``--port 0``), else on ``preferred``, or on any free port when that is taken."""
    if port is not None:
        return listen(port)
    try:
        return listen(preferred)
    except DevnetError as exc:
        sock = listen(0)
        log.warning("port %d is taken (%s): the service listens on http://%s:%d instead",
                    preferred, exc.__cause__, HOST, sock.getsockname()[1])  # fmt: skip
        return sock


def _start_server(sup: Supervisor, name: str, argv: list[str], sock: socket.socket,
                  env: dict[str, str] | None = None) -> tuple[Child, str]:  # fmt: skip
    """Start a server child on ``sock`` (the supervisor keeps it, so a restarted server
    serves on the same port); return it and its base URL."""
    child = sup.start_server(name, hypertrain_cmd(*argv), sock, env)
    return child, f"http://{HOST}:{sock.getsockname()[1]}"


def wait_http(
    url: str, child: Child, timeout_s: float = 60.0, ok: tuple[int, ...] = (200,)
) -> None:
    """Poll ``url`` until it answers one of ``ok``; fail early if the child died."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not child.alive:
            raise DevnetError(f"{child.name} exited while starting:\n{child.tail()}")
        try:
            if httpx.get(url, timeout=2).status_code in ok:
                return
        except httpx.HTTPError:
            pass
        interrupt.pause(0.2)
    raise DevnetError(f"{child.name} did not answer at {url} within {timeout_s:.0f} s")


@dataclass(frozen=True, slots=True)
class Beacon:
    url: str
    info_file: Path
    genesis_unix: int
    period_s: int


def start_beacon(sup: Supervisor, directory: Path, period_s: int) -> Beacon:
    directory.mkdir(parents=True, exist_ok=True)
    ready, info = directory / "ready.json", directory / "info.json"
    ready.unlink(missing_ok=True)  # a resumed devnet's beacon serves on a new port
    child = sup.start(
        "beacon",
        hypertrain_cmd(
            *("beacon", "serve", "--host", HOST, "--port", "0", "--period-s", str(period_s)),
            *("--key-file", str(directory / "beacon_key.json"), "--state-dir", str(directory)),
            *("--info-out", str(info), "--ready-file", str(ready)),
        ),
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        if not child.alive or time.monotonic() > deadline:
            raise DevnetError(f"the local beacon did not start:\n{child.tail()}")
        interrupt.pause(0.05)
    doc = json.loads(ready.read_text())
    chain = doc["chain_info"]
    return Beacon(doc["url"], info, int(chain["genesis_time"]), int(chain["period"]))


def start_service(
    sup: Supervisor, directory: Path, port: int | None, secrets: Secrets, beacon: Beacon
) -> str:
    """The challenge service on ``port`` (None: see :func:`listen_for_service`); its URL."""
    jurors = [j.ss58 for j in secrets.jurors]
    workers = ",".join((secrets.auditor.ss58, secrets.aggregator.ss58, *jurors))
    env = {
        "CHALLENGE_STATE_DIR": str(directory),
        "CHALLENGE_INTERNAL_TOKEN_FILE": str(secrets.internal_token),
        "CHALLENGE_ADMIN_TOKEN_FILE": str(secrets.admin_token),
        "CHALLENGE_WORKER_TOKEN_FILE": str(secrets.worker_token),
        "HYPERTRAIN_COORD_KEY_FILE": str(secrets.coordinator_seed),
        "HYPERTRAIN_METAGRAPH_SOURCE": "file",
        "HYPERTRAIN_METAGRAPH_FILE": str(secrets.metagraph),
        "HYPERTRAIN_METAGRAPH_REFRESH_S": "5",
        "HYPERTRAIN_BEACON_URLS": beacon.url,
        "HYPERTRAIN_BEACON_INFO_FILE": str(beacon.info_file),
        "HYPERTRAIN_BEACON_POLL_S": "0.5",
        "HYPERTRAIN_WORKER_HOTKEYS": workers,
        "HYPERTRAIN_AGGREGATOR_HOTKEYS": secrets.aggregator.ss58,
        # a merged round settles once the devnet's witness agreed with its tape
        "HYPERTRAIN_TAPE_WITNESSES": "1",
        "HYPERTRAIN_WITNESS_HOTKEYS": secrets.witness.ss58,
    }
    if jurors:  # they re-audit only: the audit phase's early close does not wait for them
        env["HYPERTRAIN_STANDBY_HOTKEYS"] = ",".join(jurors)
    child, url = _start_server(
        sup, "service", ["challenge", "serve"], listen_for_service(port), env
    )
    wait_http(f"{url}/health", child)
    return url


def start_relay(
    sup: Supervisor, directory: Path, run_id: str, secrets: Secrets, beacon: Beacon, port: int = 0
) -> str:
    """The relay on ``port`` (0: any free one; a resumed devnet names the one its records
    point at); its URL."""
    directory.mkdir(parents=True, exist_ok=True)
    allow = directory / "allow.json"
    members = [*secrets.islands, secrets.aggregator, secrets.auditor, *secrets.jurors,
               secrets.coordinator]  # fmt: skip
    allow.write_text(json.dumps([m.ss58 for m in members]), encoding="utf-8")
    argv = [
        *("relay", "serve"),
        *("--storage", str(directory / "blobs"), "--state-dir", str(directory / "state")),
        *("--run-id", run_id, "--allow-list", str(allow)),
        *("--coordinator", secrets.coordinator.ss58),
        *("--beacon-genesis-unix", str(beacon.genesis_unix)),
        *("--beacon-period-s", str(beacon.period_s)),
    ]
    child, url = _start_server(sup, "relay", argv, listen(port))
    wait_http(f"{url}/healthz", child)
    return url
