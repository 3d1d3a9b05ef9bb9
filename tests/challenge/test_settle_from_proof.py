"""Settlement pays only proven work, after the dispute window, into the real ledger.

Each test plays rounds through the real service routes (joins, commits, verdicts, the
signed merge-tape message) on a hand-stepped beacon, and checks what the integer
ledger and ``get_weights`` then hold for each island.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from hypertrain.challenge.app import _poll_beacon, _refresh_metagraph, create_app
from hypertrain.challenge.settlement.settle import PENDING_AUDIT, outcome
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
    write_metagraph,
)

POOL, VESTING = 1200, 1
PLATFORM = {**bearer("internal"), "X-Platform-Challenge-Slug": "hypertrain"}
WORKER = bearer("worker")


class Net:
    def __init__(self, client: TestClient, beacon: SteppedBeacon, ledger: Ledger) -> None:
        self.client, self.beacon, self.ledger = client, beacon, ledger
        self.auditor = Hotkey.from_seed(b"\x55" * 32)

    @property
    def state(self) -> ServiceState:
        state: ServiceState = self.client.app.state.service  # type: ignore[attr-defined]
        return state

    def tick(self, rounds: int = 1) -> None:
        self.beacon.round += rounds
        self.client.portal.call(_poll_beacon, self.state)  # type: ignore[union-attr]

    def phase(self, index: int) -> str:
        return str(self.client.get(f"/v1/runs/run-1/rounds/{index}").json()["phase"])

    def verdict(self, index: int, hotkey: str, result: str = "match") -> Any:
        detail = self.client.get(f"/v1/runs/run-1/rounds/{index}").json()
        segments = next(
            a["body"]["segments"] for a in detail["assignments"] if a["body"]["hotkey"] == hotkey
        )
        body: dict[str, Any] = {"round": index, "hotkey": hotkey, "segments": segments}
        body |= {"result": result, "update_checked": True}
        if result == "mismatch":
            body["first_bad_leaf"] = 1
        return self.client.post(
            "/worker/v1/verdict", headers=WORKER, json=signed(self.auditor, "verdict", body)
        )

    def to_merge(self, index: int, islands: list[Hotkey], judged: dict[str, str]) -> None:
        """Open, commit, post the given verdicts and close the audit window."""
        start = {"start_model_sha256": "aa" * 32, "start_model_url": "http://r/m"}
        opened = self.client.post(
            "/admin/v1/runs/run-1/rounds", headers=bearer("admin"), json=start
        )
        assert opened.status_code == 200, opened.text
        for key in islands:
            r = self.client.post("/v1/commit", json=signed(key, "commit", commit_body(index)))
            assert r.status_code == 200, r.text
        for _ in range(6):  # until audits are selected (at once when every island committed)
            if self.phase(index) == "audit":
                break
            self.tick()
        for hotkey, result in judged.items():
            r = self.verdict(index, hotkey, result)
            assert r.status_code == 200, r.text
        self.tick(2)  # audit window closed
        assert self.phase(index) == "merge"

    def merge(self, index: int, included: list[str], excluded: dict[str, str]) -> None:
        """Merge round ``index``; an included island the aggregator would leave out is
        moved to ``excluded`` with its reason (the service refuses a tape including it)."""
        split = aggregator_split(self.client, "run-1", index, included)
        included, excluded = split["included"], {**split["excluded"], **excluded}
        tape = {
            "round": index,
            "start_model_sha256": "aa" * 32,
            "new_model_sha256": "bb" * 32,
            "new_model_url": "http://r/m1",
            "outer_state_sha256": "cc" * 32,
            "tape_sha256": "dd" * 32,
            "included": included,
            "excluded": excluded,
        }
        r = self.client.post(
            "/worker/v1/merge", headers=WORKER, json=signed(AGGREGATOR, "merge-tape", tape)
        )
        assert r.status_code == 200, r.text
        assert r.json()["phase"] == "settle"

    def settle(self, index: int) -> None:
        self.tick(3)  # past the dispute deadline (audit close + 2)
        assert self.phase(index) == "final"

    def honest_round(self, index: int, key: Hotkey) -> None:
        """A round with one verified island: it advances the vesting clock."""
        self.to_merge(index, [key], {key.ss58_address: "match"})
        self.merge(index, included=[key.ss58_address], excluded={})
        self.settle(index)

    def balance(self, key: Hotkey) -> Any:
        return self.ledger.balances("run-1", key.ss58_address)

    def weights(self, epoch: int) -> dict[str, int]:
        r = self.client.get(f"/internal/v1/get_weights?epoch={epoch}", headers=PLATFORM)
        assert r.status_code == 200, r.text
        return {h: w for h, w in r.json()["weights"].items() if w > 0}


@pytest.fixture
def net(tmp_path: Path, miner_keys: list[Hotkey]) -> Iterator[Net]:
    settings = make_settings(tmp_path, [k.ss58_address for k in miner_keys])
    beacon = SteppedBeacon()
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        app = create_app(settings, beacon=beacon, ledger=LedgerAdapter(ledger))
        with TestClient(app) as client:
            doc = manifest_doc(rate=1.0, probation_rounds=0)
            doc["reward"] = {"pool_per_round": POOL, "vesting_rounds": VESTING}
            created = client.post("/admin/v1/runs", headers=bearer("admin"), json={"manifest": doc})
            assert created.status_code == 200, created.text
            for key in miner_keys:
                joined = client.post("/v1/join", json=signed(key, "join", join_body()))
                assert joined.status_code == 200, joined.text
            yield Net(client, beacon, ledger)


def test_only_included_and_verified_updates_are_paid(net: Net, miner_keys: list[Hotkey]) -> None:
    """Excluded (outlier), never uploaded and unnamed commits are not paid; none is faulted
    on the tape's word (all were audited ``match``)."""
    honest, outlier, ghost, unnamed = miner_keys
    keys = [k.ss58_address for k in miner_keys]
    net.to_merge(0, miner_keys, dict.fromkeys(keys, "match"))
    net.merge(
        0,
        included=[honest.ss58_address],
        excluded={outlier.ss58_address: "norm_outlier", ghost.ss58_address: "missing_blob"},
    )
    got = outcome(net.state.conn, net.state.settings, net.state.due_round, "run-1", 0)
    assert got.accepted == {honest.ss58_address: commit_body(0)["tokens"]}
    assert got.faults == {}  # the tape's word is no proof: a fault needs a verdict
    assert got.unpaid == {
        outlier.ss58_address: "norm_outlier",
        ghost.ss58_address: "missing_blob",
        unnamed.ss58_address: "not included in the merge",
    }
    assert net.ledger.summary("run-1").rounds_settled == 0  # not before the dispute window
    net.settle(0)
    assert net.balance(honest).escrowed == POOL  # the whole pool: nobody else earned
    for key in (outlier, ghost, unnamed):
        assert net.state.ledger.balances("run-1", [key.ss58_address]) == {}
    net.honest_round(1, honest)
    assert net.weights(1) == {honest.ss58_address: POOL}
    report = net.ledger.verify()
    assert report.ok, report.render()


def test_round_settles_only_after_the_dispute_window(net: Net, miner_keys: list[Hotkey]) -> None:
    keys = [k.ss58_address for k in miner_keys[:2]]
    net.to_merge(0, miner_keys[:2], dict.fromkeys(keys, "match"))
    net.merge(0, included=keys, excluded={})
    deadline = net.client.get("/v1/runs/run-1/rounds/0").json()["dispute_deadline_round"]
    while net.beacon.round < deadline:
        net.tick()
        assert net.phase(0) == "settle"
    # the next round may already open from the merged model while disputes are open
    nxt = net.client.post("/admin/v1/runs/run-1/rounds", headers=bearer("admin"), json={})
    assert nxt.status_code == 200, nxt.text
    net.tick()
    assert net.phase(0) == "final"
    assert net.balance(miner_keys[0]).escrowed == POOL // 2


def test_audit_without_verdict_holds_the_reward_until_the_auditor_answers(
    net: Net, miner_keys: list[Hotkey]
) -> None:
    honest, silent, cheat = miner_keys[:3]
    net.to_merge(0, [honest, silent, cheat], {honest.ss58_address: "match"})
    keys = [k.ss58_address for k in (honest, silent, cheat)]
    net.merge(0, included=keys, excluded={})
    net.settle(0)
    third = POOL // 3
    assert net.balance(honest).escrowed == third
    for key in (silent, cheat):  # escrowed under a hold only a verdict lifts
        bal = net.balance(key)
        assert (bal.escrowed, bal.held, bal.vested) == (third, third, 0)
    # the auditor answers late: once its own dispute window closed undisputed, a mismatch
    # burns the held reward (never before: the island could still contest it)
    assert net.verdict(0, cheat.ss58_address, "mismatch").status_code == 200
    assert net.balance(cheat).burned == 0
    net.tick(3)  # past the verdict's window (dispute_window_rounds 2 from its arrival)
    assert net.balance(cheat).burned == third and net.balance(cheat).escrowed == 0
    # a second late verdict for the same island is refused
    again = net.verdict(0, cheat.ss58_address, "match")
    assert again.status_code == 409
    # more settled rounds never release a pending hold on their own
    net.honest_round(1, honest)
    net.honest_round(2, honest)
    assert net.balance(silent).held == third
    assert net.weights(2) == {honest.ss58_address: third + POOL}
    # the silent island's auditor answers at last: a match releases the hold, and the
    # reward vests with the next settlement
    assert net.verdict(0, silent.ss58_address, "match").status_code == 200
    assert net.balance(silent).escrowed == third and net.balance(silent).vested == 0
    net.honest_round(3, honest)
    assert net.balance(silent).vested == third
    assert net.weights(3) == {honest.ss58_address: POOL, silent.ss58_address: third}
    report = net.ledger.verify()
    assert report.ok, report.render()


def test_any_verdict_but_match_is_a_fault(net: Net, miner_keys: list[Hotkey]) -> None:
    """A verdict kind other than match (e.g. ``unverifiable``) faults like a mismatch."""
    a, b = miner_keys[:2]
    net.to_merge(0, [a, b], {a.ss58_address: "match", b.ss58_address: "match"})
    net.state.conn.execute(
        "UPDATE verdicts SET result = 'unverifiable' WHERE hotkey = ?", (b.ss58_address,)
    )
    net.merge(0, included=[a.ss58_address], excluded={b.ss58_address: "audit_mismatch"})
    got = outcome(net.state.conn, net.state.settings, net.state.due_round, "run-1", 0)
    assert set(got.accepted) == {a.ss58_address}
    assert got.faults[b.ss58_address].startswith("unverifiable verdict")
    net.settle(0)
    net.honest_round(1, a)
    assert net.weights(1) == {a.ss58_address: POOL}


def test_pending_hold_sentinel_never_vests() -> None:
    assert PENDING_AUDIT == 2**53 - 1  # the ledger's largest round: no clock reaches it


def _metagraph(net: Net, tmp_path: Path, hotkeys: list[str], epoch: int) -> None:
    write_metagraph(tmp_path / "metagraph.json", hotkeys, epoch=epoch)
    net.client.portal.call(_refresh_metagraph, net.state)  # type: ignore[union-attr]
    assert net.state.metagraph.snapshot is not None
    assert net.state.metagraph.snapshot.epoch == epoch


def test_deregistration_burns_at_the_next_epoch(
    net: Net, miner_keys: list[Hotkey], tmp_path: Path
) -> None:
    """A hotkey that leaves loses its unpaid value; back again, it starts from zero."""
    stay, leaver = miner_keys[:2]
    everyone = [k.ss58_address for k in miner_keys]
    for index in range(2):
        net.to_merge(
            index, [stay, leaver], {stay.ss58_address: "match", leaver.ss58_address: "match"}
        )
        net.merge(index, included=[stay.ss58_address, leaver.ss58_address], excluded={})
        net.settle(index)
    assert net.balance(leaver).escrowed == POOL // 2  # round 1's reward, not vested yet
    assert net.balance(leaver).vested == POOL // 2
    _metagraph(net, tmp_path, [h for h in everyone if h != leaver.ss58_address], epoch=2)
    first = net.client.get("/internal/v1/get_weights?epoch=2", headers=PLATFORM).json()
    assert leaver.ss58_address not in first["weights"]
    assert net.balance(leaver).burned == POOL  # escrow and vested-unpaid, burned
    assert sum(first["weights"].values()) <= first["full_share_mass"]
    _metagraph(net, tmp_path, everyone, epoch=3)  # it registers again
    net.honest_round(2, stay)
    again = net.client.get("/internal/v1/get_weights?epoch=3", headers=PLATFORM).json()
    assert leaver.ss58_address not in again["weights"]
    assert sum(again["weights"].values()) <= again["full_share_mass"]
    report = net.ledger.verify()
    assert report.ok, report.render()


def test_a_new_uid_is_a_deregistration_even_if_the_hotkey_is_listed_again(
    net: Net, miner_keys: list[Hotkey], tmp_path: Path
) -> None:
    """Deregistered and registered again between two snapshots (its uid moves from 1 to
    3, the hotkey is listed in both): the old registration's value burns at the next
    epoch; the hotkeys whose uid did not move keep theirs."""
    stay, leaver = miner_keys[:2]
    for index in range(2):
        net.to_merge(
            index, [stay, leaver], {stay.ss58_address: "match", leaver.ss58_address: "match"}
        )
        net.merge(index, included=[stay.ss58_address, leaver.ss58_address], excluded={})
        net.settle(index)
    owed = net.balance(leaver).escrowed + net.balance(leaver).vested
    assert owed == POOL
    moved = [stay, miner_keys[2], miner_keys[3], leaver]  # leaver's uid: 1 -> 3
    _metagraph(net, tmp_path, [k.ss58_address for k in moved], epoch=2)
    weights = net.client.get("/internal/v1/get_weights?epoch=2", headers=PLATFORM).json()
    assert leaver.ss58_address not in weights["weights"]
    assert net.balance(leaver).burned == POOL
    assert net.balance(stay).burned == 0 and stay.ss58_address in weights["weights"]
    report = net.ledger.verify()
    assert report.ok, report.render()


def test_weights_for_an_older_epoch_are_a_typed_409(net: Net, miner_keys: list[Hotkey]) -> None:
    net.honest_round(0, miner_keys[0])
    assert net.client.get("/internal/v1/get_weights?epoch=5", headers=PLATFORM).status_code == 200
    old = net.client.get("/internal/v1/get_weights?epoch=4", headers=PLATFORM)
    assert (old.status_code, old.json()["error"]) == (409, "epoch_superseded")
