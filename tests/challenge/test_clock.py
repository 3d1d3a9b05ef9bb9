"""One clock: every window closes by the scheduled (due) round, whatever the poll holds.

The service runs on loopback (uvicorn on a socket bound and listening here) over a
beacon whose verified rounds stop while the chain's schedule moves on
(:class:`LaggingBeacon`). Each test brings a window to an open state with verified
rounds, then lets only the schedule pass the deadline: the next request is refused
although the last verified round is still inside the window. The background poll is
off (the test polls), and the first request waits in the socket's backlog until the
service is up, so nothing here waits on time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from hypertrain.challenge.app import _poll_beacon, create_app
from hypertrain.challenge.state import ServiceState
from hypertrain.competition.messages import encode_losses
from hypertrain.competition.pool import encode_pool
from hypertrain.dispute import opinputs
from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    REFEREE,
    REFEREED,
    RUN,
    dispute_doc,
    to_verdict,
    verdict_on,
)
from tests.challenge.disputeplay import TENSORS, play_to_referee
from tests.challenge.disputeplay import commitment as _commitment
from tests.challenge.disputeplay import open_body as _open_body
from tests.challenge.helpers import FakeLedger, LaggingBeacon, bearer, make_settings, signed
from tests.competition.world import EVALUATOR, HEX, MINERS, POOL, spec_doc
from tests.competition.world import World as CompeteWorld

NO_POLL = {"beacon_poll_s": 1e5}  # the test drives every poll


@contextlib.contextmanager
def _serve(app: FastAPI) -> Iterator[tuple[httpx.Client, ServiceState]]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)  # a request queues here until uvicorn accepts: no start-up wait
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            assert client.get("/version").status_code == 200  # served after start-up
            yield client, app.state.service
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def _poll(state: ServiceState, beacon: LaggingBeacon, rounds: int) -> None:
    for _ in range(rounds):
        beacon.round += 1
        beacon.due = beacon.round
        asyncio.run(_poll_beacon(state))  # every state access holds the writer lock


@dataclass
class Live:
    """The dispute run (tests/challenge/dispute_scenario.py) on loopback, without its
    honeypot list; ``lag`` moves only the schedule."""

    client: httpx.Client
    beacon: LaggingBeacon
    state: ServiceState

    def tick(self, rounds: int = 1) -> None:
        _poll(self.state, self.beacon, rounds)

    def lag(self, to: int) -> None:
        assert to > self.beacon.round, "a lag is the schedule ahead of the verified round"
        self.beacon.due = to

    def post(self, path: str, key: Hotkey, domain: str, body: dict[str, Any], **kw: Any) -> Any:
        return self.client.post(path, json=signed(key, domain, body, run_id=RUN), **kw)

    def round0(self) -> dict[str, Any]:
        row: dict[str, Any] = self.client.get(f"/v1/runs/{RUN}/rounds").json()[0]
        return row


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    settings = make_settings(tmp_path, [k.ss58_address for k in ISLANDS], **NO_POLL)
    beacon = LaggingBeacon()
    with _serve(create_app(settings, beacon=beacon, ledger=FakeLedger())) as (client, state):
        doc = dispute_doc(REFEREED)
        r = client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
        assert r.status_code == 200, r.text
        yield Live(client, beacon, state)


def _refused(r: Any, code: str) -> None:
    assert (r.status_code, r.json()["error"]) == (409, code), r.text


def test_the_verdict_window_closes_by_the_clock(live: Live) -> None:
    to_verdict(live)  # island 0 judged inside the window
    close = live.round0()["audit_close_round"]
    assert live.beacon.round < close
    live.lag(close)
    _refused(verdict_on(live, AUDITOR, ISLANDS[1], "match"), "wrong_phase")


def test_the_dispute_window_closes_by_the_clock(live: Live) -> None:
    verdict_id, segment = to_verdict(live)
    deadline = live.round0()["dispute_deadline_round"]
    live.lag(deadline + 1)  # the verified round is still inside the audit window
    opened = live.post("/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment))
    _refused(opened, "late")


def _open(live: Live) -> tuple[str, dict[str, Any]]:
    verdict_id, segment = to_verdict(live)
    opened = live.post("/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment))
    assert opened.status_code == 200, opened.text
    return opened.json()["dispute_id"], opened.json()["game"]


def test_a_game_answer_is_late_by_the_clock(live: Live) -> None:
    dispute_id, game = _open(live)
    live.lag(game["deadline_round"] + 1)
    body = _commitment(game, "island")
    _refused(live.post(f"/v1/disputes/{dispute_id}/answer", ISLANDS[0], "dispute-answer", body),
             "late")  # fmt: skip


def test_a_ruling_is_late_by_the_clock(live: Live) -> None:
    dispute_id, _ = _open(live)
    game = play_to_referee(live.client, RUN, dispute_id, ISLANDS[0], AUDITOR)
    assert game["stage"] == "referee", game
    data = opinputs.encode(TENSORS)
    put = live.client.put(f"/v1/disputes/{dispute_id}/inputs", content=data)
    assert put.status_code == 200, put.text
    ruling = {"dispute_id": dispute_id, "query": put.json()["game"]["query"],
              "inputs_sha256": hashlib.sha256(data).hexdigest(),
              "outputs": game["outputs"]["auditor"]}  # fmt: skip
    live.lag(game["deadline_round"] + 1)
    _refused(live.post(f"/v1/disputes/{dispute_id}/ruling", REFEREE, "dispute-ruling", ruling),
             "late")  # fmt: skip


@dataclass
class LiveCompete(CompeteWorld):
    """The competition world (tests/competition/world.py) on loopback (``client`` is an
    httpx client)."""

    live_state: ServiceState | None = None

    @property
    def state(self) -> ServiceState:
        assert self.live_state is not None
        return self.live_state

    def tick(self, rounds: int = 1) -> None:
        assert isinstance(self.beacon, LaggingBeacon)
        _poll(self.state, self.beacon, rounds)

    def stamps(self) -> dict[str, int]:
        rows = self.state.conn.execute("SELECT hotkey, commit_beacon_round FROM compete_commits")
        return {r["hotkey"]: int(r["commit_beacon_round"]) for r in rows}


@pytest.fixture
def compete(tmp_path: Path) -> Iterator[LiveCompete]:
    settings = make_settings(tmp_path, [k.ss58_address for k in MINERS], **NO_POLL)
    beacon = LaggingBeacon()
    with _serve(create_app(settings, beacon=beacon)) as (client, state):
        r = client.post(
            "/admin/v1/competitions",
            json={"spec": spec_doc(), "pool": encode_pool(POOL)},
            headers=bearer("admin"),
        )
        assert r.status_code == 200, r.text
        yield LiveCompete(client, beacon, state)  # type: ignore[arg-type]


def test_a_competition_commit_is_stamped_by_the_clock(compete: LiveCompete) -> None:
    """A commit made once the schedule is past a round carries that round, so the
    eligibility delay counts from it, never from a lagging poll."""
    assert isinstance(compete.beacon, LaggingBeacon)
    compete.beacon.due = compete.beacon.round + 3
    compete.submit(MINERS[0], "a")
    assert compete.stamps()[MINERS[0].ss58_address] == compete.beacon.round + 3


def test_a_reveal_and_its_copy_are_ordered_by_the_clock(compete: LiveCompete) -> None:
    assert isinstance(compete.beacon, LaggingBeacon)
    compete.submit(MINERS[0], "a")
    early = compete.reveal(MINERS[0], "a")
    _refused(early, "reveal_too_early")
    compete.beacon.due = compete.beacon.round + 1  # the next round is due, not yet verified
    assert compete.reveal(MINERS[0], "a").status_code == 200
    compete.submit(MINERS[1], "a")  # a copy of the revealed files
    stamps = compete.stamps()
    assert stamps[MINERS[1].ss58_address] > stamps[MINERS[0].ss58_address]


def test_the_score_window_closes_by_the_clock(compete: LiveCompete) -> None:
    assert isinstance(compete.beacon, LaggingBeacon)
    sha = compete.submit(MINERS[0], "a")
    compete.tick()
    assert compete.reveal(MINERS[0], "a").status_code == 200
    compete.tick(4)  # cycle 0 opens
    task = compete.task()
    assert task["models"] and compete.beacon.round <= task["score_deadline_round"]
    compete.beacon.due = task["score_deadline_round"] + 1
    body = {"cycle": task["cycle"], "model_sha256": sha, "pages_key": task["pages_key"],
            "losses_f32": encode_losses([1.0] * 4), "determinism_sha256": HEX}  # fmt: skip
    late = compete.post("/worker/v1/compete/score", EVALUATOR, "compete-score", body,
                        headers=bearer("worker"))  # fmt: skip
    _refused(late, "late")
