"""The shared harness of the dashboard's Chromium tests: the browser, and a live service
on loopback driven through two real rounds (three islands; the honeypot honest in round 0,
caught cheating in round 1, disputes and loses), with its honeypot list revealed and a
baseline curve posted. In CI (``CI=true``) a missing browser fails instead of skipping.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from hypertrain.challenge.app import create_app
from hypertrain.dispute import opinputs
from hypertrain.protocol.honeypots import HoneypotEntry, HoneypotList, commitment
from hypertrain.protocol.identity import Hotkey
from tests.challenge.dashdata import run_rounds
from tests.challenge.disputeplay import TENSORS, TREE, open_body, play_to_referee
from tests.challenge.helpers import (
    FakeLedger,
    SteppedBeacon,
    bearer,
    make_settings,
    manifest_doc,
    signed,
)

CHROMIUM = Path(os.environ.get("HYPERTRAIN_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def require_browser() -> Path:
    """The Chromium binary, or skip (locally) / fail (in CI) when it is missing."""
    if CHROMIUM.exists() or shutil.which(str(CHROMIUM)):
        return CHROMIUM
    message = f"Chromium not found at {CHROMIUM} (apt-get install -y chromium)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


class LiveHarness:
    """The attributes run_rounds uses, over real HTTP; the beacon is stepped by hand."""

    def __init__(self, base: str, beacon: SteppedBeacon, miners: list[Any], auditor: Any) -> None:
        self.client = httpx.Client(base_url=base, timeout=10)
        self.beacon, self.miners, self.auditor = beacon, miners, auditor

    def tick(self, rounds: int = 1) -> None:
        target = self.beacon.round + rounds
        self.beacon.round = target
        deadline = time.monotonic() + 30
        while not self._caught_up(target):
            assert time.monotonic() < deadline, "the service did not act on the beacon round"
            time.sleep(0.02)

    def _caught_up(self, target: int) -> bool:
        """The service saw ``target`` and every round machine has moved as far as it allows."""
        if self.client.get("/v1/beacon").json()["round"] != target:
            return False
        for run in self.client.get("/v1/runs").json():
            for rnd in self.client.get(f"/v1/runs/{run['run_id']}/rounds").json():
                if rnd["phase"] == "beacon":
                    return False
                if rnd["phase"] == "train" and target > rnd["commit_deadline_round"]:
                    return False
                if rnd["phase"] == "audit" and target >= rnd["audit_close_round"]:
                    return False
        return True


REFEREE = Hotkey.from_seed(b"\x66" * 32)


CHEAT_ROUND = 1  # the honeypot is honest in round 0 and cheats (and is caught) in round 1


def _honeypots(miners: list[Hotkey]) -> HoneypotList:
    """Islands 0 and 1 honest honeypots, island 2 the cheat honest in round 0 and caught
    cheating in round 1 (its only cheating round of the two it runs)."""
    cheat = HoneypotEntry(
        hotkey=miners[2].ss58_address,
        role="island",
        strategy="wrong-samples",
        cheats_from_round=CHEAT_ROUND,
    )
    return HoneypotList(
        salt="5a" * 32,
        entries=[
            HoneypotEntry(hotkey=miners[0].ss58_address, role="island", strategy="honest"),
            HoneypotEntry(hotkey=miners[1].ss58_address, role="island", strategy="honest"),
            cheat,
        ],
    )


def _dispute(h: LiveHarness, index: int) -> None:
    """In the cheating round the caught island disputes; the game narrows and the referee
    upholds."""
    if index != CHEAT_ROUND:
        return
    cheat = h.miners[2]
    detail = h.client.get(f"/v1/runs/run-1/rounds/{index}").json()
    verdict = next(
        v for v in detail["verdicts"] if v["envelope"]["body"]["hotkey"] == cheat.ss58_address
    )
    segment = verdict["envelope"]["body"]["first_bad_leaf"] - 1  # the one it may contest
    body = open_body(verdict["verdict_id"], segment, round=index)
    r = h.client.post("/v1/disputes", json=signed(cheat, "dispute-open", body))
    assert r.status_code == 200, r.text
    dispute_id = r.json()["dispute_id"]
    game = play_to_referee(h.client, "run-1", dispute_id, cheat, h.auditor)
    assert game["stage"] == "referee", game
    data = opinputs.encode(TENSORS)
    r = h.client.put(f"/v1/disputes/{dispute_id}/inputs", content=data)
    assert r.status_code == 200, r.text
    ruling = {
        "dispute_id": dispute_id,
        "query": r.json()["game"]["query"],
        "inputs_sha256": hashlib.sha256(data).hexdigest(),
        "outputs": game["outputs"]["auditor"],
    }
    r = h.client.post(
        f"/v1/disputes/{dispute_id}/ruling", json=signed(REFEREE, "dispute-ruling", ruling)
    )
    assert r.status_code == 200 and r.json()["game"]["outcome"] == "upheld", r.text


def _admin(h: LiveHarness, method: str, path: str, body: Any) -> None:
    r = h.client.request(method, path, json=body, headers=bearer("admin"))
    assert r.status_code == 200, r.text


@contextmanager
def live_service(tmp_path: Path, miner_keys: list[Any]) -> Iterator[tuple[str, uvicorn.Server]]:
    """A service on loopback driven through two real rounds (the honeypot caught in round
    1, which it disputes and loses), its honeypot list revealed and a baseline posted."""
    auditor = Hotkey.from_seed(b"\x55" * 32)
    settings = make_settings(tmp_path, [k.ss58_address for k in miner_keys])
    beacon = SteppedBeacon()
    app = create_app(settings, beacon=beacon, ledger=FakeLedger())
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # bound here and handed to uvicorn: no port race
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "service did not start"
        time.sleep(0.05)
    h = LiveHarness(base, beacon, miner_keys, auditor)
    try:
        _drive(h, miner_keys)
        yield base, server
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _drive(h: LiveHarness, miner_keys: list[Any]) -> None:
    """Create the run, play its two rounds, reveal the honeypots, post the baseline."""
    doc = manifest_doc()
    # the schedule plans the two rounds the fixture runs: the dashboard's total and "finished"
    doc["inner"] = {**doc.get("inner", {}), "total_steps": 2 * doc["round"]["inner_steps"]}
    doc["audit"] = {**doc["audit"], "probation_rounds": 2}  # every island audited each round
    doc["dispute"] = {
        "bond": 0, "answer_rounds": 5, "referee_rounds": 5, "referees": [REFEREE.ss58_address]
    }  # fmt: skip
    honeypots = _honeypots(miner_keys)
    doc["honeypots"] = {"commitment": commitment(honeypots), "reveal_round": 1}
    _admin(h, "POST", "/admin/v1/runs", {"manifest": doc})
    run_rounds(
        h,  # type: ignore[arg-type]
        rounds=2,
        checkpoint_root=TREE.root_hex,
        after_verdicts=_dispute,  # type: ignore[arg-type]
        cheat_round=CHEAT_ROUND,
    )
    _admin(h, "POST", "/admin/v1/runs/run-1/honeypots", honeypots.model_dump(mode="json"))
    _admin(h, "PUT", "/admin/v1/runs/run-1/baseline", {"heldout_loss": [4.4, 3.9]})  # per round
