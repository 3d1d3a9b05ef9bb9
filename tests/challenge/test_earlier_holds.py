"""An earlier round's unproven audit holds the island's later rewards, and its verdict
releases or burns them (docs/mechanism.md, Settlement from proof: "held (earlier round)")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypertrain.challenge.rounds.rule import PENDING_AUDIT
from tests.challenge import test_disputes as _disputes
from tests.challenge.helpers import (
    FakeLedger,
    SteppedBeacon,
    bearer,
    make_settings,
    manifest_doc,
    signed,
)
from tests.challenge.test_disputes import AUDITOR, ISLANDS, RUN, Service
from tests.challenge.test_outsider_1 import (
    _assignment,
    _commit_round_0,
    _merge,
    _open_and_commit,
)


def _late(svc: Service, island: Any, result: str) -> None:
    body = {**_assignment(svc, island), "result": result}
    body.pop("selection_beacon_round")
    if result == "mismatch":
        body["first_bad_leaf"] = body["segments"][0] + 1
    posted = svc.client.post(
        "/worker/v1/verdict", headers=bearer("worker"), json=signed(AUDITOR, "verdict", body, RUN)
    )
    assert posted.status_code == 200, posted.text


def test_a_late_verdict_releases_or_burns_the_later_rounds_it_held(tmp_path: Path) -> None:
    """Both islands' round-0 audits go unanswered; round 1 (unaudited) settles with both
    held. A late ``match`` for island 0 releases its rounds 0 and 1; a late ``mismatch``
    for island 1 faults it and releases nothing: the held round-1 reward burns with it."""
    settings = make_settings(tmp_path, [k.ss58_address for k in ISLANDS])
    svc = Service(settings, SteppedBeacon(), FakeLedger(), None)  # type: ignore[arg-type]
    honest, cheater = (k.ss58_address for k in ISLANDS)
    with _disputes._running(svc):
        doc = manifest_doc(RUN, rate=0.0, segments=1)
        doc["dispute"] = {"bond": 0}
        r = svc.client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
        assert r.status_code == 200, r.text
        _commit_round_0(svc)
        svc.tick(30)
        _merge(svc, 0, pending=True)
        svc.tick()
        _open_and_commit(svc, 1)
        svc.tick(30)
        _merge(svc, 1)
        svc.tick()
        assert svc.ledger.held[(RUN, 1)] == {honest: PENDING_AUDIT, cheater: PENDING_AUDIT}
        _late(svc, ISLANDS[0], "match")
        assert {(RUN, 0, honest), (RUN, 1, honest)} <= set(svc.ledger.released)
        _late(svc, ISLANDS[1], "mismatch")
        assert (RUN, 0, cheater) not in svc.ledger.faults  # disputable until its own window
        svc.tick(30)  # the late verdict's own dispute window closes undisputed
        assert (RUN, 0, cheater) in svc.ledger.faults
        assert all(h != cheater for _, _, h in svc.ledger.released)
