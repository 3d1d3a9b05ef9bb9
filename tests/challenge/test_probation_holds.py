"""Probation holds end to end: the service settles into the real integer ledger.

Two islands join before round 0 with two probation rounds (rounds 0 and 1). While on
probation their rewards sit in escrow, held: nothing vests and get_weights pays
nothing. A mismatch in round 1 burns everything the cheater holds. From round 2 the
honest island's held rewards start vesting and it is paid like anyone else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from hypertrain.challenge.app import _poll_beacon, create_app
from hypertrain.challenge.state import ServiceState
from hypertrain.challenge.wiring import LedgerAdapter
from hypertrain.ledger import Ledger
from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import (
    AGGREGATOR,
    SteppedBeacon,
    aggregator_split,
    bearer,
    commit_body,
    join_body,
    make_settings,
    manifest_doc,
    signed,
)

POOL, VESTING = 1000, 2
PLATFORM = {**bearer("internal"), "X-Platform-Challenge-Slug": "hypertrain"}


class Net:
    def __init__(self, client: TestClient, beacon: SteppedBeacon, ledger: Ledger) -> None:
        self.client, self.beacon, self.ledger = client, beacon, ledger
        self.auditor = Hotkey.from_seed(b"\x55" * 32)

    def tick(self, rounds: int) -> None:
        self.beacon.round += rounds
        state: ServiceState = self.client.app.state.service  # type: ignore[attr-defined]
        self.client.portal.call(_poll_beacon, state)  # type: ignore[union-attr]

    def play(
        self,
        index: int,
        islands: list[Hotkey],
        cheat: Hotkey | None = None,
        after_commit: Callable[[], None] | None = None,
    ) -> None:
        """One round: open, commit, (``after_commit``), audit (a mismatch for ``cheat``),
        merge, final."""
        c = self.client
        start = {"start_model_sha256": "aa" * 32, "start_model_url": "http://r/m"}
        opened = c.post("/admin/v1/runs/run-1/rounds", headers=bearer("admin"), json=start)
        assert opened.status_code == 200, opened.text
        for key in islands:
            body = commit_body(index, island=key.ss58_address)
            assert c.post("/v1/commit", json=signed(key, "commit", body)).is_success
        if after_commit is not None:
            after_commit()
        self.tick(1)  # when every rostered island committed, this beacon round selects
        if c.get(f"/v1/runs/run-1/rounds/{index}").json()["phase"] == "train":
            self.tick(3)  # someone in the roster did not commit: the deadline closes it
        detail = c.get(f"/v1/runs/run-1/rounds/{index}").json()
        for a in detail["assignments"]:
            body = a["body"]
            bad = cheat is not None and body["hotkey"] == cheat.ss58_address
            verdict: dict[str, Any] = {
                "round": index,
                "hotkey": body["hotkey"],
                "segments": body["segments"],
                "result": "mismatch" if bad else "match",
            }
            if bad:
                verdict["first_bad_leaf"] = body["segments"][0] + 1  # its first segment's end
            r = c.post(
                "/worker/v1/verdict",
                headers=bearer("worker"),
                json=signed(self.auditor, "verdict", verdict),
            )
            assert r.status_code == 200, r.text
        self.tick(2)
        tape = {
            "round": index,
            "start_model_sha256": "aa" * 32,
            "new_model_sha256": "bb" * 32,
            "new_model_url": "http://r/m1",
            "outer_state_sha256": "cc" * 32,
            "tape_sha256": "dd" * 32,
            **aggregator_split(c, "run-1", index, [k.ss58_address for k in islands]),
        }
        merge = signed(AGGREGATOR, "merge-tape", tape)
        r = c.post("/worker/v1/merge", headers=bearer("worker"), json=merge)
        assert r.status_code == 200, r.text
        self.tick(3)  # past the dispute deadline (audit close + 2): the round settles
        assert c.get(f"/v1/runs/run-1/rounds/{index}").json()["phase"] == "final"

    def roster(self) -> dict[str, dict[str, Any]]:
        return {i["hotkey"]: i for i in self.client.get("/v1/runs/run-1/roster").json()}

    def paid(self, epoch: int) -> set[str]:
        r = self.client.get(f"/internal/v1/get_weights?epoch={epoch}", headers=PLATFORM)
        assert r.status_code == 200, r.text
        return {h for h, w in r.json()["weights"].items() if w > 0}


@pytest.fixture
def net(tmp_path: Path, miner_keys: list[Hotkey]) -> Iterator[Net]:
    settings = make_settings(tmp_path, [k.ss58_address for k in miner_keys])
    beacon = SteppedBeacon()
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        app = create_app(settings, beacon=beacon, ledger=LedgerAdapter(ledger))
        with TestClient(app) as client:
            doc = manifest_doc(rate=0.0, probation_rounds=2)
            doc["reward"] = {"pool_per_round": POOL, "vesting_rounds": VESTING}
            created = client.post("/admin/v1/runs", headers=bearer("admin"), json={"manifest": doc})
            assert created.status_code == 200, created.text
            yield Net(client, beacon, ledger)


def test_probation_rewards_are_held_then_burned_or_vested(
    net: Net, miner_keys: list[Hotkey]
) -> None:
    honest, cheater = miner_keys[0], miner_keys[1]
    for key in (honest, cheater):
        joined = net.client.post("/v1/join", json=signed(key, "join", join_body()))
        assert joined.json()["probation_until_round"] == 2
    h, x = honest.ss58_address, cheater.ss58_address

    net.play(0, [honest, cheater])
    roster = net.roster()
    for hotkey in (h, x):
        assert roster[hotkey]["status"] == "probation"
        assert (roster[hotkey]["escrow"], roster[hotkey]["held"]) == (POOL // 2, POOL // 2)
        assert roster[hotkey]["vested"] == roster[hotkey]["paid"] == 0
    assert net.paid(10) == set()

    net.play(1, [honest, cheater], cheat=cheater)  # caught in its last probation round
    roster = net.roster()
    assert roster[x]["status"] == "proven_fault"
    assert (roster[x]["escrow"], roster[x]["held"], roster[x]["burned"]) == (0, 0, POOL // 2)
    assert (roster[h]["escrow"], roster[h]["held"], roster[h]["vested"]) == (1500, 1500, 0)
    assert net.paid(11) == set()  # round 0 would have vested by now without the hold

    net.play(2, [honest])  # probation over: the held rewards start vesting
    roster = net.roster()
    assert roster[h]["status"] == "active"
    assert roster[h]["held"] == 0
    assert (roster[h]["escrow"], roster[h]["vested"]) == (POOL + 750, 750)
    assert net.paid(12) == {h}
    assert net.ledger.balances("run-1", h).paid == 750
    net.play(3, [honest])
    bal = net.ledger.balances("run-1", h)
    assert (bal.escrowed, bal.vested + bal.paid, bal.burned) == (1500, 2000, 0)
    assert net.ledger.balances("run-1", x).burned == POOL // 2
    report = net.ledger.verify()
    assert report.ok, report.render()


def test_a_faulted_island_is_audited_every_later_round(net: Net, miner_keys: list[Hotkey]) -> None:
    """Rate 0 after probation audits nobody, except an island with a proven earlier fault."""
    honest, cheater = miner_keys[0], miner_keys[1]
    for key in (honest, cheater):
        assert net.client.post("/v1/join", json=signed(key, "join", join_body())).is_success
    net.play(0, [honest, cheater])
    net.play(1, [honest, cheater], cheat=cheater)
    net.play(2, [honest, cheater])  # probation over: rate 0 selects only the faulted island
    detail = net.client.get("/v1/runs/run-1/rounds/2").json()
    assert [a["body"]["hotkey"] for a in detail["assignments"]] == [cheater.ss58_address]
    assert detail["probation"] == {cheater.ss58_address: True}


def test_an_island_that_sits_out_probation_is_paid_once_it_has_served_it(
    net: Net, miner_keys: list[Hotkey]
) -> None:
    """Probation ends on the event "its probation rounds passed their audits", not on a
    round fixed when a probation reward settled: sitting out holds the reward longer."""
    sitter, honest = miner_keys[0], miner_keys[1]
    for key in (sitter, honest):
        assert net.client.post("/v1/join", json=signed(key, "join", join_body())).is_success
    s = sitter.ss58_address
    net.play(0, [sitter, honest])
    for index in (1, 2, 3):
        net.play(index, [honest])
        assert s not in net.paid(10 + index)
        assert (net.roster()[s]["held"], net.roster()[s]["vested"]) == (POOL // 2, 0)
    net.play(4, [sitter, honest])  # its second probation round: served once it settles
    assert net.roster()[s]["probation_until_round"] == 5
    assert s not in net.paid(14)  # released from round 5 on, never before
    net.play(5, [sitter, honest])
    entry = net.roster()[s]
    assert (entry["status"], entry["held"], entry["vested"]) == ("active", 0, POOL // 2)
    assert s in net.paid(15)
    bal = net.ledger.balances("run-1", s)
    assert (bal.paid, bal.escrowed, bal.burned) == (POOL // 2, POOL, 0)
    report = net.ledger.verify()
    assert report.ok, report.render()


def test_an_island_that_leaves_during_probation_never_serves_it(
    net: Net, miner_keys: list[Hotkey]
) -> None:
    """A leave is final: the island can commit no further probation round, so what it
    earned in probation stays held (a deregistration burns it), however long the run goes."""
    leaver, honest = miner_keys[0], miner_keys[1]
    for key in (leaver, honest):
        assert net.client.post("/v1/join", json=signed(key, "join", join_body())).is_success
    net.play(0, [leaver, honest])
    left = net.client.post("/v1/leave", json=signed(leaver, "leave", {"reason": "done"}))
    assert left.json()["left_round"] == 1
    for index in (1, 2, 3, 4):
        net.play(index, [honest])
        assert leaver.ss58_address not in net.paid(10 + index)
    entry = net.roster()[leaver.ss58_address]
    assert (entry["held"], entry["vested"], entry["paid"]) == (POOL // 2, 0, 0)
    report = net.ledger.verify()
    assert report.ok, report.render()
