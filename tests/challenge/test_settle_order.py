"""Settlement after a dispute: the same ledger whatever the order the events arrive in.

Island X's round-0 audit holds its round-1 reward while the round-0 verdict may still
change (docs/mechanism.md, Settlement from proof: "held (earlier round)", "forfeited").
Each case is played twice on the real service with the real ledger, the round-0
decision arriving before round 1 settles and after, and must end in the same balances:

* a round-0 mismatch that stands (undisputed, or its dispute upheld) burns X's round-1
  reward: at round 1's settlement when the fault is already proven, or by the fault's
  own booking when round 1 settled first (never a hold that lasts forever);
* a round-0 mismatch overturned by a dispute (another auditor's ``match`` agrees with X)
  releases X's round-1 reward, whether round 1 settled before the dispute was decided
  (the decision re-runs the hold) or after.
"""

from __future__ import annotations

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
POOL = 1000
AUDITOR = Hotkey.from_seed(b"\x55" * 32)
OTHER_AUDITOR = Hotkey.from_seed(b"\x56" * 32)
HONEST, X = (Hotkey.from_seed(bytes([i + 1]) * 32) for i in range(2))
ANSWER_ROUNDS = 20  # long enough for round 1 to settle while the game waits


class Net:
    def __init__(self, client: TestClient, beacon: SteppedBeacon, ledger: Ledger) -> None:
        self.client, self.beacon, self.ledger = client, beacon, ledger

    def tick(self, rounds: int = 1) -> None:
        for _ in range(rounds):
            self.beacon.round += 1
            self.client.portal.call(_poll_beacon, self.client.app.state.service)  # type: ignore[union-attr,attr-defined]

    def post(self, path: str, key: Hotkey, domain: str, body: dict[str, Any]) -> Any:
        return self.client.post(path, json=signed(key, domain, body, run_id=RUN))

    def phase(self, index: int) -> str:
        return str(self.client.get(f"/v1/runs/{RUN}/rounds/{index}").json()["phase"])

    def verdict(self, auditor: Hotkey, assignment: dict[str, Any], result: str) -> str:
        body = {k: v for k, v in assignment.items() if k != "selection_beacon_round"}
        body["result"] = result
        if result == "mismatch":
            body["first_bad_leaf"] = min(body["segments"]) + 1  # the segment a dispute contests
        r = self.client.post(
            "/worker/v1/verdict",
            headers=bearer("worker"),
            json=signed(auditor, "verdict", body, RUN),
        )
        assert r.status_code == 200, r.text
        return str(r.json()["verdict_id"])

    def to_verdicts(self, index: int, mismatch: bool, second: bool = False) -> str | None:
        """Open round ``index``; both commit; one auditor judges (X a mismatch if asked),
        and with ``second`` another auditor judges both ``match``."""
        start = {"start_model_sha256": "aa" * 32, "start_model_url": "http://r/m"}
        opened = self.client.post(
            f"/admin/v1/runs/{RUN}/rounds", headers=bearer("admin"), json=start if not index else {}
        )
        assert opened.status_code == 200, opened.text
        for key in (HONEST, X):
            body = {**commit_body(index), "checkpoint_root": TREE.root_hex}
            assert self.post("/v1/commit", key, "commit", body).status_code == 200
        self.tick()
        found = None
        auditor = AUDITOR if index == 0 else OTHER_AUDITOR  # AUDITOR may be barred by then
        for a in self.client.get(f"/v1/runs/{RUN}/rounds/{index}").json()["assignments"]:
            bad = mismatch and a["body"]["hotkey"] == X.ss58_address
            vid = self.verdict(auditor, a["body"], "mismatch" if bad else "match")
            found = vid if bad else found
            if second:
                self.verdict(OTHER_AUDITOR, a["body"], "match")
        return found

    def merge(self, index: int) -> None:
        self.tick(2)  # the audit window closes
        tape = {
            "round": index,
            "start_model_sha256": "aa" * 32 if not index else f"{index:02x}" * 32,
            "new_model_sha256": f"{index + 1:02x}" * 32,
            "new_model_url": "http://r/m",
            "outer_state_sha256": "cc" * 32,
            "tape_sha256": "dd" * 32,
            **aggregator_split(self.client, RUN, index, [HONEST.ss58_address, X.ss58_address]),
        }
        m = self.client.post(
            "/worker/v1/merge",
            headers=bearer("worker"),
            json=signed(AGGREGATOR, "merge-tape", tape, RUN),
        )
        assert m.status_code == 200, m.text

    def settle(self, index: int) -> None:
        self.merge(index)
        self.tick(3)  # past the dispute window
        assert self.phase(index) == "final"

    def dispute(self, verdict_id: str, answer: bool) -> None:
        """X disputes its round-0 verdict; ``answer``: X commits its first answer (the
        silent auditor then loses at the deadline), else X is silent (and loses)."""
        detail = self.client.get(f"/v1/runs/{RUN}/rounds/0").json()
        verdict = next(v for v in detail["verdicts"] if v["verdict_id"] == verdict_id)
        segment = verdict["envelope"]["body"]["segments"][0]
        r = self.post("/v1/disputes", X, "dispute-open", open_body(verdict_id, segment, 0))
        assert r.status_code == 200, r.text
        if answer:
            view = r.json()
            a = self.post(
                f"/v1/disputes/{view['dispute_id']}/answer",
                X,
                "dispute-answer",
                commitment(view["game"], "island"),
            )
            assert a.status_code == 200, a.text

    def decide_dispute(self) -> None:
        """Tick until the game's deadline passes and round 0 settles."""
        for _ in range(ANSWER_ROUNDS + 10):
            if self.phase(0) == "final":
                return
            self.tick()
        raise AssertionError("round 0 never settled")

    def releases(self, key: Hotkey) -> list[int]:
        """The rounds whose hold on ``key``'s reward the ledger released."""
        rows = self.ledger._conn.execute(
            "SELECT point FROM journal WHERE run_id = ? AND kind = 'release' AND hotkey = ?"
            " ORDER BY seq",
            (RUN, key.ss58_address),
        )
        return [int(r[0]) for r in rows]

    def balances(self, key: Hotkey) -> tuple[int, int, int]:
        """(unpaid value still owed: escrow + vested + paid, of it held, burned)."""
        bal = self.ledger.balances(RUN, key.ss58_address)
        return bal.escrowed + bal.vested + bal.paid, bal.held, bal.burned


@pytest.fixture
def net(tmp_path: Path) -> Iterator[Net]:
    settings = make_settings(tmp_path, [HONEST.ss58_address, X.ss58_address])
    beacon = SteppedBeacon()
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        app = create_app(settings, beacon=beacon, ledger=LedgerAdapter(ledger))
        with TestClient(app) as client:
            n = Net(client, beacon, ledger)
            doc = manifest_doc(RUN, rate=1.0, segments=1, probation_rounds=0)
            doc["reward"] = {"pool_per_round": POOL, "vesting_rounds": 2}
            doc["dispute"] = {"bond": 0, "answer_rounds": ANSWER_ROUNDS}
            r = client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
            assert r.status_code == 200, r.text
            for key in (HONEST, X):
                assert n.post("/v1/join", key, "join", join_body()).status_code == 200
            yield n


def _end(net: Net) -> dict[str, tuple[int, int, int]]:
    """Two more honest rounds (the vesting clock moves), then both islands' balances."""
    for index in (2, 3):
        net.to_verdicts(index, mismatch=False)
        net.settle(index)
    report = net.ledger.verify()
    assert report.ok, report.render()
    return {"honest": net.balances(HONEST), "x": net.balances(X)}


# After a proven round-0 fault: X earns nothing from round 1 on (its round-1 half burned,
# rounds 2 and 3 forfeited too); the honest island keeps round 0's whole pool and its
# half of every later round.
FAULT_END = {"honest": (POOL + 3 * POOL // 2, 0, 0), "x": (0, 0, 3 * POOL // 2)}


def test_a_fault_proven_before_the_later_round_settles_burns_its_reward(net: Net) -> None:
    assert net.to_verdicts(0, mismatch=True) is not None
    net.settle(0)  # undisputed: the fault is proven at round 0's settlement
    net.to_verdicts(1, mismatch=False)
    net.settle(1)
    owed, held, burned = net.balances(X)
    assert (owed, held, burned) == (0, 0, POOL // 2), "burned at settlement, never held forever"
    assert _end(net) == FAULT_END


def test_a_fault_proven_after_the_later_round_settled_burns_its_held_reward(net: Net) -> None:
    verdict_id = net.to_verdicts(0, mismatch=True)
    assert verdict_id is not None
    net.dispute(verdict_id, answer=False)  # X will lose, but only at the deadline
    net.merge(0)
    net.to_verdicts(1, mismatch=False)
    net.settle(1)  # round 0 still waits for its dispute
    assert net.phase(0) == "settle"
    assert net.balances(X) == (POOL // 2, POOL // 2, 0)  # held while the fault may change
    net.decide_dispute()  # upheld: round 0 settles with the fault, which burns round 1
    assert net.balances(X) == (0, 0, POOL // 2)
    assert _end(net) == FAULT_END


# After an overturned round-0 mismatch: X is paid for every round like the honest island.
OVERTURN_END = {"honest": (2 * POOL, 0, 0), "x": (2 * POOL, 0, 0)}


def test_an_overturn_before_the_later_round_settles_pays_it(net: Net) -> None:
    verdict_id = net.to_verdicts(0, mismatch=True, second=True)
    assert verdict_id is not None
    net.dispute(verdict_id, answer=True)  # the auditor stays silent: overturned
    net.merge(0)
    net.decide_dispute()
    net.to_verdicts(1, mismatch=False)
    net.settle(1)
    assert net.balances(X)[1:] == (0, 0)
    assert _end(net) == OVERTURN_END


def test_an_overturn_after_the_later_round_settled_releases_its_hold(net: Net) -> None:
    verdict_id = net.to_verdicts(0, mismatch=True, second=True)
    assert verdict_id is not None
    net.dispute(verdict_id, answer=True)
    net.merge(0)
    net.to_verdicts(1, mismatch=False)
    net.settle(1)
    assert net.phase(0) == "settle"
    assert net.balances(X) == (POOL // 2, POOL // 2, 0)  # held for the round-0 verdict
    net.decide_dispute()  # the game is decided on a tick: that re-runs round 1's hold
    assert net.releases(X) == [1], "the overturn released the later round's hold"
    assert _end(net) == OVERTURN_END
