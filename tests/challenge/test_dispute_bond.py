"""Dispute bonds end to end: the service locks and settles them in the real ledger.

Round 0 gives both islands escrow. In round 1 island 0 is judged a mismatch and
disputes it: opening locks the manifest's bond as a ``bond_lock`` entry; winning
returns it (``bond_return``), losing burns it (``bond_burn``) before the round's fault
burns the rest. ``Ledger.verify`` rebuilds every case from the journal alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from hypertrain.challenge.app import _poll_beacon, create_app
from hypertrain.challenge.wiring import LedgerAdapter
from hypertrain.ledger import Ledger
from hypertrain.protocol.identity import Hotkey
from tests.challenge.disputeplay import TREE, commitment, open_body
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

RUN = "run-1"
BOND = 100
AUDITOR = Hotkey.from_seed(b"\x55" * 32)
ISLANDS = [Hotkey.from_seed(bytes([i + 1]) * 32) for i in range(2)]


class Net:
    def __init__(self, client: TestClient, beacon: SteppedBeacon, ledger: Ledger) -> None:
        self.client, self.beacon, self.ledger = client, beacon, ledger

    def tick(self, rounds: int = 1) -> None:
        self.beacon.round += rounds
        self.client.portal.call(_poll_beacon, self.client.app.state.service)  # type: ignore[union-attr,attr-defined]

    def post(self, path: str, key: Hotkey, domain: str, body: dict[str, Any]) -> Any:
        return self.client.post(path, json=signed(key, domain, body, run_id=RUN))

    def phase(self, index: int) -> str:
        return str(self.client.get(f"/v1/runs/{RUN}/rounds/{index}").json()["phase"])

    def to_verdicts(self, index: int, mismatch: Hotkey | None) -> str | None:
        """Open round ``index``, both islands commit, the auditor judges both."""
        start = {"start_model_sha256": "aa" * 32, "start_model_url": "http://r/m"}
        opened = self.client.post(
            f"/admin/v1/runs/{RUN}/rounds", headers=bearer("admin"), json=start if not index else {}
        )
        assert opened.status_code == 200, opened.text
        for key in ISLANDS:
            body = {**commit_body(index), "checkpoint_root": TREE.root_hex}
            assert self.post("/v1/commit", key, "commit", body).status_code == 200
        self.tick(1)
        found = None
        for a in self.client.get(f"/v1/runs/{RUN}/rounds/{index}").json()["assignments"]:
            body = {k: v for k, v in a["body"].items() if k != "selection_beacon_round"}
            bad = mismatch is not None and body["hotkey"] == mismatch.ss58_address
            first_bad = min(body["segments"]) + 1  # the dispute contests that segment
            body |= (
                {"result": "mismatch", "first_bad_leaf": first_bad} if bad else {"result": "match"}
            )
            r = self.client.post(
                "/worker/v1/verdict",
                headers=bearer("worker"),
                json=signed(AUDITOR, "verdict", body, RUN),
            )
            assert r.status_code == 200, r.text
            if bad:
                found = r.json()["verdict_id"]
        return found

    def merge_and_settle(self, index: int) -> None:
        self.tick(2)  # the audit window closes
        tape = {
            "round": index,
            "start_model_sha256": "aa" * 32 if not index else f"{index:02x}" * 32,
            "new_model_sha256": f"{index + 1:02x}" * 32,
            "new_model_url": "http://r/m",
            "outer_state_sha256": "cc" * 32,
            "tape_sha256": "dd" * 32,
            **aggregator_split(self.client, RUN, index, [k.ss58_address for k in ISLANDS]),
        }
        m = self.client.post(
            "/worker/v1/merge",
            headers=bearer("worker"),
            json=signed(AGGREGATOR, "merge-tape", tape, RUN),
        )
        assert m.status_code == 200, m.text
        self.tick(3)  # past the dispute window: it settles once every dispute is decided
        assert self.phase(index) == "final"

    def bond_entries(self) -> list[dict[str, Any]]:
        rows = self.ledger._conn.execute(
            "SELECT body FROM journal WHERE run_id = ? AND kind LIKE 'bond_%' ORDER BY seq", (RUN,)
        )
        return [json.loads(bytes(r[0])) for r in rows]


@pytest.fixture
def net(tmp_path: Path) -> Iterator[Net]:
    settings = make_settings(tmp_path, [k.ss58_address for k in ISLANDS])
    beacon = SteppedBeacon()
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        app = create_app(settings, beacon=beacon, ledger=LedgerAdapter(ledger))
        with TestClient(app) as client:
            n = Net(client, beacon, ledger)
            doc = manifest_doc(RUN, rate=1.0, segments=1, probation_rounds=0)
            doc["dispute"] = {"bond": BOND, "answer_rounds": 3, "referee_rounds": 3}
            r = client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
            assert r.status_code == 200, r.text
            for key in ISLANDS:
                assert n.post("/v1/join", key, "join", join_body()).status_code == 200
            yield n


def _open(net: Net, verdict_id: str) -> dict[str, Any]:
    detail = net.client.get(f"/v1/runs/{RUN}/rounds/1").json()
    verdict = next(v for v in detail["verdicts"] if v["verdict_id"] == verdict_id)
    segment = verdict["envelope"]["body"]["segments"][0]
    r = net.post("/v1/disputes", ISLANDS[0], "dispute-open", open_body(verdict_id, segment, 1))
    assert r.status_code == 200, r.text
    view: dict[str, Any] = r.json()
    return view


def test_no_escrow_still_disputes_with_no_bond(net: Net) -> None:
    """The bond never makes a verdict unanswerable: a newcomer with nothing escrowed
    disputes for free (one dispute per verdict), and no bond entry is journaled."""
    verdict_id = net.to_verdicts(0, ISLANDS[0])  # round 0: nothing earned yet
    assert verdict_id is not None
    detail = net.client.get(f"/v1/runs/{RUN}/rounds/0").json()
    segment = detail["verdicts"][0]["envelope"]["body"]["segments"][0]
    r = net.post("/v1/disputes", ISLANDS[0], "dispute-open", open_body(verdict_id, segment, 0))
    assert r.status_code == 200, r.text
    assert r.json()["bond"] == 0
    assert [d["dispute_id"] for d in net.client.get(f"/v1/disputes?run_id={RUN}").json()] == [
        r.json()["dispute_id"]
    ]
    assert net.bond_entries() == []


def test_won_dispute_returns_the_bond(net: Net) -> None:
    net.to_verdicts(0, None)
    net.merge_and_settle(0)
    escrow = net.ledger.balances(RUN, ISLANDS[0].ss58_address).escrowed
    verdict_id = net.to_verdicts(1, ISLANDS[0])
    assert verdict_id is not None
    view = _open(net, verdict_id)
    lock = net.bond_entries()
    assert [(e["kind"], e["amount"], e["detail"]["dispute"]) for e in lock] == [
        ("bond_lock", BOND, view["dispute_id"])
    ]
    game = view["game"]
    r = net.post(
        f"/v1/disputes/{view['dispute_id']}/answer",
        ISLANDS[0],
        "dispute-answer",
        commitment(game, "island"),
    )
    assert r.status_code == 200, r.text
    net.tick(4)  # the auditor never answers: overturned
    assert [e["kind"] for e in net.bond_entries()] == ["bond_lock", "bond_return"]
    net.merge_and_settle(1)
    bal = net.ledger.balances(RUN, ISLANDS[0].ss58_address)
    assert bal.burned == 0 and bal.escrowed + bal.vested > escrow
    assert net.ledger.verify().ok


def test_lost_dispute_burns_the_bond_then_the_fault_the_rest(net: Net) -> None:
    net.to_verdicts(0, None)
    net.merge_and_settle(0)
    verdict_id = net.to_verdicts(1, ISLANDS[0])
    assert verdict_id is not None
    _open(net, verdict_id)
    net.tick(4)  # the island never answers: upheld
    entries = net.bond_entries()
    assert [(e["kind"], e["amount"]) for e in entries] == [("bond_lock", BOND), ("bond_burn", BOND)]
    net.merge_and_settle(1)
    bal = net.ledger.balances(RUN, ISLANDS[0].ss58_address)
    assert bal.escrowed == bal.vested == 0 and bal.burned >= BOND
    kinds = [
        str(r[0])
        for r in net.ledger._conn.execute(
            "SELECT kind FROM journal WHERE run_id = ? AND hotkey = ? ORDER BY seq",
            (RUN, ISLANDS[0].ss58_address),
        )
    ]
    assert kinds.index("bond_burn") < kinds.index("fault")
    assert net.ledger.verify().ok
