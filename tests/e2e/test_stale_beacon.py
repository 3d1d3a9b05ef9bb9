"""A service whose beacon lags still closes its commit window on time (real processes).

The challenge service runs as a child process behind a :class:`~tests.e2e.gate.BeaconGate`
in front of a real local beacon. While the gate follows the beacon, a round opens. Then
the gate freezes: the service can no longer fetch or verify any newer beacon round, as
when its polling lags or its endpoints fail, and one of the round's two islands commits
inside the window. drand
rounds are a fixed function of time, so the selection round may already be public
elsewhere; the service must not keep accepting commits. Once the round due by its own
clock passes the commit deadline, the second island's commit is refused as ``late``
although the service's latest verified round is still inside the window, and ``/health``
reports the lagging beacon.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from hypertrain.beacon import LocalBeaconProcess
from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import commit_body, join_body, manifest_doc, signed
from tests.e2e.gate import BeaconGate
from tests.e2e.launch import Fleet, http_ok, listener, port_of, wait_for
from tests.e2e.network import TOKENS, service_env, write_metagraph, write_secrets

pytestmark = pytest.mark.slow
RUN = "run-1"  # the run id of tests.challenge.helpers.manifest_doc


@contextmanager
def _following(gate: BeaconGate, chain_hash: str) -> Iterator[None]:
    """Let the gate serve every round the beacon has published, until the block ends."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(0.1):
            try:
                gate.cap = gate.real_latest(chain_hash)
            except (httpx.HTTPError, ValueError):
                continue

    gate.cap = gate.real_latest(chain_hash)
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def _get(service: str, path: str) -> Any:
    return httpx.get(f"{service}{path}", timeout=10).json()


def test_a_lagging_beacon_closes_the_commit_window(
    tmp_path: Path, beacon: LocalBeaconProcess
) -> None:
    sec = write_secrets(tmp_path)
    early, late = Hotkey.from_seed(b"\x31" * 32), Hotkey.from_seed(b"\x32" * 32)
    write_metagraph(tmp_path / "metagraph.json", {early.ss58_address: 0, late.ss58_address: 1})
    gate = BeaconGate(beacon.url)
    sock = listener()
    service = f"http://127.0.0.1:{port_of(sock)}"
    admin = {"authorization": f"Bearer {TOKENS['admin']}"}
    fleet = Fleet(tmp_path / "logs", env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        with _following(gate, beacon.chain.chain_hash_hex):
            env = service_env(tmp_path, gate.url, sec, [])
            fleet.hypertrain("service", "challenge", "serve", env=env, sock=sock)
            wait_for(lambda: http_ok(f"{service}/v1/beacon"), 60, "the service")
            wait_for(lambda: _get(service, "/v1/beacon")["round"], 30, "a verified beacon round")
            doc = manifest_doc()
            doc["round"]["commit_window_rounds"] = 20  # room for the first commit under load
            r = httpx.post(f"{service}/admin/v1/runs", headers=admin, json={"manifest": doc})
            assert r.status_code == 200, r.text
            for key in (early, late):
                joined = httpx.post(f"{service}/v1/join", json=signed(key, "join", join_body()))
                assert joined.status_code == 200 and joined.json()["admitted"], joined.text
            opened = httpx.post(
                f"{service}/admin/v1/runs/{RUN}/rounds",
                headers=admin,
                json={"start_model_sha256": "ab" * 32, "start_model_url": "http://relay/m"},
            )
            assert opened.status_code == 200, opened.text
        # the gate is frozen: no newer round reaches the service from here on
        verified = gate.cap
        wait_for(
            lambda: _get(service, "/v1/beacon")["round"] == verified or None,
            30,
            "the service at the gate's last round",
        )
        first = httpx.post(f"{service}/v1/commit", json=signed(early, "commit", commit_body(0)))
        assert first.status_code == 200, first.text
        deadline = _get(service, f"/v1/runs/{RUN}/rounds")[0]["commit_deadline_round"]
        assert verified <= deadline  # the window is still open by the verified beacon

        def due_past_deadline() -> dict[str, Any] | None:
            beacon_health = _get(service, "/health").get("beacon") or {}
            past = (beacon_health.get("due_round") or 0) > deadline
            return beacon_health if past and beacon_health.get("lagging") else None

        health = wait_for(due_past_deadline, 60, "the service's clock past the commit deadline")
        refused = httpx.post(f"{service}/v1/commit", json=signed(late, "commit", commit_body(0)))
        assert (refused.status_code, refused.json()["error"]) == (409, "late"), refused.text
        assert _get(service, "/v1/beacon")["round"] == verified  # still nothing newer verified
        assert health["verified_round"] == verified and health["lagging"] is True
        assert _get(service, f"/v1/runs/{RUN}/rounds")[0]["commits"] == 1
    finally:
        fleet.stop()
        sock.close()
        gate.close()
