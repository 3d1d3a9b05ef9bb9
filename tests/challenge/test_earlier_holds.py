"""An earlier round's unproven audit holds the island's later rewards, and its verdict
releases or burns them (docs/mechanism.md, Settlement from proof: "held (earlier round)")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypertrain.challenge.rule import PENDING_AUDIT
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    RUN,
    Service,
    commit_round_0,
    merge,
    open_and_commit,
    started,
    verdict_on,
)
from tests.challenge.helpers import manifest_doc


def _late(svc: Service, island: Any, result: str) -> None:
    posted = verdict_on(svc, AUDITOR, island, result)
    assert posted.status_code == 200, posted.text


def test_a_late_verdict_releases_or_burns_the_later_rounds_it_held(tmp_path: Path) -> None:
    """Both islands' round-0 audits go unanswered; round 1 (unaudited) settles with both
    held. A late ``match`` for island 0 releases its rounds 0 and 1; a late ``mismatch``
    for island 1 faults it and releases nothing: the held round-1 reward burns with it."""
    honest, cheater = (k.ss58_address for k in ISLANDS)
    doc = manifest_doc(RUN, rate=0.0, segments=1)
    doc["dispute"] = {"bond": 0}
    with started(tmp_path, doc) as svc:
        commit_round_0(svc)
        svc.tick(30)
        merge(svc, 0, pending=True)
        svc.tick()
        open_and_commit(svc, 1)
        svc.tick(30)
        merge(svc, 1)
        svc.tick()
        assert svc.ledger.held[(RUN, 1)] == {honest: PENDING_AUDIT, cheater: PENDING_AUDIT}
        _late(svc, ISLANDS[0], "match")
        assert {(RUN, 0, honest), (RUN, 1, honest)} <= set(svc.ledger.released)
        _late(svc, ISLANDS[1], "mismatch")
        assert (RUN, 0, cheater) not in svc.ledger.faults  # disputable until its own window
        svc.tick(30)  # the late verdict's own dispute window closes undisputed
        assert (RUN, 0, cheater) in svc.ledger.faults
        assert all(h != cheater for _, _, h in svc.ledger.released)
