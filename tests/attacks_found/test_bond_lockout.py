"""A lying auditor locks an honest newcomer out for good: its faults are never disputable.

docs/threats.md (Disputes): "every fault-bearing verdict is contestable"; docs/mechanism.md
(Disputes): opening a dispute locks ``dispute.bond`` of the island's escrow "or is refused
(``no_bond``) when the island's escrow ... is smaller", and a fault "burns everything of that
hotkey in the run that has not been paid".

A newcomer has no escrow in its first round, so a lying auditor's mismatch on it cannot be
disputed. The fault stands, the island earns nothing for the round and is flagged
``accused_before`` (audited every round). In every later round the same auditor signs another
mismatch; each fault burns whatever the island escrowed meanwhile, so its escrow never
reaches the bond and none of the lies can ever be contested: the honest island is never paid
and the liar is never checked nor barred.

The network here is the real challenge service (HTTP routes, signed envelopes, stepped beacon)
on the real SQLite ledger.
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
from tests.challenge.disputeplay import TREE, open_body
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

RUN = "run-lock"
BOND = 100  # far below one round's pool: an island that earned one round can pay it
LIAR = Hotkey.from_seed(b"\x55" * 32)  # a listed auditor that lies about one island
VICTIM, OTHER = (Hotkey.from_seed(bytes([i + 1]) * 32) for i in range(2))
ISLANDS = [VICTIM, OTHER]


class Net:
    def __init__(self, client: TestClient, beacon: SteppedBeacon, ledger: Ledger) -> None:
        self.client, self.beacon, self.ledger = client, beacon, ledger

    def tick(self, rounds: int = 1) -> None:
        self.beacon.round += rounds
        self.client.portal.call(_poll_beacon, self.client.app.state.service)  # type: ignore[union-attr,attr-defined]

    def post(self, path: str, key: Hotkey, domain: str, body: dict[str, Any]) -> Any:
        return self.client.post(path, json=signed(key, domain, body, run_id=RUN))

    def round_with_a_lie(self, index: int) -> tuple[str, int]:
        """Open round ``index``; both islands commit honestly; the liar judges the victim
        ``mismatch`` (a disputable claim on its first audited segment), the other ``match``."""
        start = {"start_model_sha256": "aa" * 32, "start_model_url": "http://r/m"}
        opened = self.client.post(
            f"/admin/v1/runs/{RUN}/rounds", headers=bearer("admin"), json=start if not index else {}
        )
        assert opened.status_code == 200, opened.text
        for key in ISLANDS:
            body = {**commit_body(index), "checkpoint_root": TREE.root_hex}
            assert self.post("/v1/commit", key, "commit", body).status_code == 200
        self.tick(1)
        lie = ("", 0)
        for a in self.client.get(f"/v1/runs/{RUN}/rounds/{index}").json()["assignments"]:
            body = {k: v for k, v in a["body"].items() if k != "selection_beacon_round"}
            segment = min(body["segments"])
            if body["hotkey"] == VICTIM.ss58_address:
                body |= {"result": "mismatch", "first_bad_leaf": segment + 1, "check": "segment"}
            else:
                body |= {"result": "match"}
            r = self.client.post(
                "/worker/v1/verdict",
                headers=bearer("worker"),
                json=signed(LIAR, "verdict", body, RUN),
            )
            assert r.status_code == 200, r.text
            if body["hotkey"] == VICTIM.ss58_address:
                lie = (r.json()["verdict_id"], segment)
        assert lie[0], "the victim was not assigned"
        return lie

    def merge_and_settle(self, index: int) -> None:
        self.tick(2)
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
        self.tick(3)
        phase = self.client.get(f"/v1/runs/{RUN}/rounds/{index}").json()["phase"]
        assert phase == "final", phase


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


def test_a_lying_auditor_cannot_keep_an_honest_newcomer_from_ever_disputing(net: Net) -> None:
    """Proves an island with less escrow than ``dispute.bond`` (here none) can still
    dispute a fault verdict: the bond never makes a verdict unanswerable."""
    refusals = []
    for index in range(4):
        verdict_id, segment = net.round_with_a_lie(index)
        r = net.post("/v1/disputes", VICTIM, "dispute-open", open_body(verdict_id, segment, index))
        if r.status_code == 200:
            return  # one lie could be contested: the game (and the re-audit) can catch the liar
        refusals.append((index, r.json()["error"]))
        net.merge_and_settle(index)
    other = net.ledger.balances(RUN, OTHER.ss58_address)
    try:
        victim = net.ledger.balances(RUN, VICTIM.ss58_address).escrowed
    except Exception as exc:  # the ledger has never credited the victim at all
        victim = f"none ({type(exc).__name__})"
    raise AssertionError(
        f"four false mismatches on an honest island, none disputable: {refusals}; "
        f"victim escrow {victim}, other island escrow {other.escrowed + other.vested}"
    )
