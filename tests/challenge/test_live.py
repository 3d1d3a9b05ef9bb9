"""End to end on the real local drand-compatible beacon (real signed rounds, no fake clock).

One full round through every phase in-process, and a uvicorn subprocess killed with
SIGKILL mid-round and restarted on the same state directory.

The rounds are real and signed, but the service only sees them up to a cap the test
moves (:class:`GatedBeacon`), so no phase can close before the test has done its part,
however slow the machine. The subprocess listens on a socket the test bound (port 0)
and handed over, so a restart can never lose its port to another process.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from hypertrain.beacon import BeaconClient, LocalBeaconProcess, start_local_beacon
from hypertrain.challenge.app import create_app
from hypertrain.challenge.ports import BeaconRound
from hypertrain.challenge.wiring import DrandBeacon
from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import (
    AGGREGATOR,
    bearer,
    commit_body,
    join_body,
    make_settings,
    manifest_doc,
    signed,
    write_metagraph,
    write_secrets,
)

pytestmark = pytest.mark.slow
START = "aa" * 32
MINERS = [Hotkey.from_seed(bytes([40 + i]) * 32) for i in range(2)]
AUDITOR = Hotkey.from_seed(b"\x66" * 32)


@pytest.fixture
def local_beacon(tmp_path: Path) -> Iterator[LocalBeaconProcess]:
    with start_local_beacon(tmp_path / "beacon", period_s=1) as beacon:
        yield beacon


def _wait(check: Callable[[], Any], timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


class GatedBeacon:
    """Verified rounds of a real beacon, released to the service up to ``cap`` only."""

    def __init__(self, inner: DrandBeacon) -> None:
        self.inner = inner
        self.cap = 0

    def latest(self) -> BeaconRound:
        return self.inner.get(self.cap)

    def get(self, round_number: int) -> BeaconRound:
        if round_number > self.cap:
            raise ValueError(f"round {round_number} is not released yet")
        return self.inner.get(round_number)

    def release(self, round_number: int) -> None:
        """Wait (bounded) until the real beacon has ``round_number``, then release it."""
        _wait(lambda: self.inner.latest().round >= round_number, timeout_s=120)
        self.cap = round_number


def _phase(client: TestClient | httpx.Client, index: int = 0) -> str:
    return str(client.get(f"/v1/runs/run-1/rounds/{index}").json()["phase"])


def test_full_round_on_local_beacon(tmp_path: Path, local_beacon: LocalBeaconProcess) -> None:
    client_b = BeaconClient([local_beacon.url], local_beacon.chain, tmp_path / "bc.sqlite")
    settings = make_settings(tmp_path, [k.ss58_address for k in MINERS])
    beacon = GatedBeacon(DrandBeacon(client_b))
    beacon.release(1)
    app = create_app(settings, beacon=beacon)  # the real integer ledger
    with TestClient(app) as c:
        _wait(lambda: c.get("/v1/beacon").json()["round"])
        assert c.post(
            "/admin/v1/runs", headers=bearer("admin"), json={"manifest": manifest_doc(rate=1.0)}
        ).is_success
        for key in MINERS:
            assert c.post("/v1/join", json=signed(key, "join", join_body())).is_success
        opened = c.post(
            "/admin/v1/runs/run-1/rounds",
            headers=bearer("admin"),
            json={"start_model_sha256": START, "start_model_url": "http://r/m0"},
        )
        assert opened.status_code == 200, opened.text
        for key in MINERS:
            r = c.post("/v1/commit", json=signed(key, "commit", commit_body(0)))
            assert r.status_code == 200, r.text
        deadline = opened.json()["body"]["commit_deadline_round"]
        # every island committed: the next beacon round selects (releasing more would run
        # past the audit window, which starts at the selection)
        beacon.release(c.get("/v1/beacon").json()["round"] + 1)
        _wait(lambda: _phase(c) == "audit")
        detail = c.get("/v1/runs/run-1/rounds/0").json()
        # every island committed: the first beacon round after the last commit selects
        selected = detail["selection_beacon_round"]
        assert selected <= deadline + 1
        selector = client_b.get(selected)  # anyone can fetch and verify it
        assert c.get("/v1/beacon").json()["round"] >= selector.round
        assert len(detail["assignments"]) == 2
        for a in detail["assignments"]:
            body = a["body"]
            verdict = {
                "round": 0,
                "hotkey": body["hotkey"],
                "segments": body["segments"],
                "result": "match",
            }
            r = c.post(
                "/worker/v1/verdict",
                headers=bearer("worker"),
                json=signed(AUDITOR, "verdict", verdict),
            )
            assert r.status_code == 200, r.text
        beacon.release(detail["audit_close_round"])
        _wait(lambda: _phase(c) == "merge")
        tape = {
            "round": 0,
            "start_model_sha256": START,
            "new_model_sha256": "bb" * 32,
            "new_model_url": "http://r/m1",
            "outer_state_sha256": "cc" * 32,
            "tape_sha256": "dd" * 32,
            "included": [k.ss58_address for k in MINERS],
        }
        r = c.post(
            "/worker/v1/merge",
            headers=bearer("worker"),
            json=signed(AGGREGATOR, "merge-tape", tape),
        )
        assert r.status_code == 200, r.text
        closes = c.get("/v1/runs/run-1/rounds/0").json()["dispute_deadline_round"]
        beacon.release(closes + 1)
        _wait(lambda: _phase(c) == "final")  # after the dispute window
        roster = c.get("/v1/runs/run-1/roster").json()
        assert sorted(i["escrow"] + i["vested"] for i in roster) == [500_000_000] * 2
        weights = c.get(
            "/internal/v1/get_weights?epoch=2",
            headers={**bearer("internal"), "X-Platform-Challenge-Slug": "hypertrain"},
        )
        assert weights.status_code == 200, weights.text
        assert set(weights.json()["weights"]) <= {k.ss58_address for k in MINERS}
    client_b.close()


def _listener() -> socket.socket:
    """A listening loopback socket on a free port, kept by the test across restarts."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


def _start(env: dict[str, str], sock: socket.socket) -> subprocess.Popen[bytes]:
    # the documented start command, settings from the environment, on a handed-over socket
    port = int(sock.getsockname()[1])
    command = [sys.executable, "-m", "uvicorn", "hypertrain.challenge.app:app"]
    command += ["--fd", str(sock.fileno()), "--log-level", "warning"]
    proc = subprocess.Popen(
        command, env=env, cwd=Path(__file__).parents[2], pass_fds=(sock.fileno(),)
    )
    _wait(lambda: proc.poll() is not None or _healthy(port), timeout_s=60)
    assert proc.poll() is None, "the service exited at startup"
    return proc


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_sigkill_mid_round_and_restart(tmp_path: Path, local_beacon: LocalBeaconProcess) -> None:
    files = write_secrets(tmp_path / "secrets")
    env = {
        **os.environ,
        "CHALLENGE_STATE_DIR": str(tmp_path / "state"),
        "CHALLENGE_INTERNAL_TOKEN_FILE": str(files["internal"]),
        "CHALLENGE_ADMIN_TOKEN_FILE": str(files["admin"]),
        "CHALLENGE_WORKER_TOKEN_FILE": str(files["worker"]),
        "HYPERTRAIN_COORD_KEY_FILE": str(files["coord"]),
        "HYPERTRAIN_METAGRAPH_SOURCE": "file",
        "HYPERTRAIN_METAGRAPH_FILE": str(
            write_metagraph(tmp_path / "mg.json", [k.ss58_address for k in MINERS])
        ),
        "HYPERTRAIN_BEACON_URLS": local_beacon.url,
        "HYPERTRAIN_BEACON_INFO_FILE": str(tmp_path / "beacon" / "info.json"),
        "HYPERTRAIN_BEACON_POLL_S": "0.2",
        "HYPERTRAIN_AGGREGATOR_HOTKEYS": AGGREGATOR.ss58_address,
        "HYPERTRAIN_TAPE_WITNESSES": "0",  # a local network without a witness (opt-out)
    }
    sock = _listener()
    port = int(sock.getsockname()[1])
    proc = _start(env, sock)
    c = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
    try:
        doc = manifest_doc()
        doc["round"]["commit_window_rounds"] = 60
        assert c.post("/admin/v1/runs", headers=bearer("admin"), json={"manifest": doc}).is_success
        for key in MINERS:
            assert c.post("/v1/join", json=signed(key, "join", join_body())).is_success
        assert c.post(
            "/admin/v1/runs/run-1/rounds",
            headers=bearer("admin"),
            json={"start_model_sha256": START, "start_model_url": "u"},
        ).is_success
        first = signed(MINERS[0], "commit", commit_body(0))
        assert c.post("/v1/commit", json=first).status_code == 200
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        proc = _start(env, sock)
        assert _phase(c) == "train"
        assert c.post("/v1/commit", json=first).json()["error"] == "replayed"
        again = c.post("/v1/commit", json=signed(MINERS[0], "commit", commit_body(0)))
        assert (again.status_code, again.json()["error"]) == (409, "duplicate")
        assert (
            c.post("/v1/commit", json=signed(MINERS[1], "commit", commit_body(0))).status_code
            == 200
        )
        assert c.get("/v1/runs/run-1/rounds").json()[0]["commits"] == 2
    finally:
        c.close()
        proc.kill()
        proc.wait(timeout=10)
        sock.close()
