"""A front-run copy: an island recomputes another island's public assignment and commits
its bytes first (an outsider's finding, docs/threats.md, Merge).

With ``reset`` and a public sample assignment anyone can compute an honest island's
exact update for a round as soon as it opens. The earliest commit kept the bytes, so the
honest island was excluded ``duplicate_update`` and unpaid and the copier was paid; at
the audit rate the copier was rarely replayed, and losing the race cost it nothing. Now
every island whose commit shares its update or its checkpoint root with another island's
commit of the round is audited in that round (docs/mechanism.md, "Audit selection").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario import (
    AUDITOR,
    Service,
    joined_run,
    open_round,
    post_tape,
    tape,
)
from tests.challenge.helpers import bearer, commit_body, manifest_doc, signed

RUN = "run-f"
COPIER, VICTIM, OTHER = (Hotkey.from_seed(bytes([0x30 + i]) * 32) for i in range(3))
ISLANDS = (COPIER, VICTIM, OTHER)


def _digest(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


def _body(index: int, update: str, root: str) -> dict[str, Any]:
    return {**commit_body(index), "update_sha256": update, "checkpoint_root": root}


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Service]:
    """Three islands at audit rate 0: only probation (round 0) and forced audits."""
    doc = manifest_doc(RUN, rate=0.0, segments=1)
    doc["dispute"] = {"bond": 0}
    with joined_run(tmp_path, doc, ISLANDS) as service:
        _round(
            service,
            0,
            {k: _body(0, _digest(f"u{i}"), _digest(f"r{i}")) for i, k in enumerate(ISLANDS)},
        )
        _judge(service, 0, dict.fromkeys(ISLANDS, "match"))
        _merge(service, 0, included=list(ISLANDS), excluded={})
        yield service


def _assigned(svc: Service, index: int) -> dict[str, list[int]]:
    rows = svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/{index}/assignments", headers=bearer("worker")
    ).json()
    return {a["body"]["hotkey"]: a["body"]["segments"] for a in rows}


def _round(svc: Service, index: int, bodies: dict[Hotkey, dict[str, Any]]) -> None:
    """Open round ``index`` and commit ``bodies`` in their order; select the audits."""
    open_round(svc, run_id=RUN)
    for key, body in bodies.items():
        posted = svc.client.post("/v1/commit", json=signed(key, "commit", body, RUN))
        assert posted.status_code == 200, posted.text
    svc.tick()  # every island committed: the next beacon round selects the audits
    phase = svc.client.get(f"/v1/runs/{RUN}/rounds/{index}").json()["phase"]
    assert phase == "audit", phase


def _judge(svc: Service, index: int, results: dict[Hotkey, str]) -> None:
    assigned = _assigned(svc, index)
    for key, result in results.items():
        body: dict[str, Any] = {
            "round": index,
            "hotkey": key.ss58_address,
            "segments": assigned[key.ss58_address],
            "result": result,
        }
        if result == "mismatch":
            body["first_bad_leaf"] = body["segments"][0] + 1
        posted = svc.client.post(
            "/worker/v1/verdict",
            headers=bearer("worker"),
            json=signed(AUDITOR, "verdict", body, RUN),
        )
        assert posted.status_code == 200, posted.text
    svc.tick(30)


def _merge(svc: Service, index: int, included: list[Hotkey], excluded: dict[Hotkey, str]) -> None:
    body = tape(
        index,
        included=sorted(k.ss58_address for k in included),
        excluded={k.ss58_address: reason for k, reason in excluded.items()},
    )
    merged = post_tape(svc, body, run_id=RUN)
    assert merged.status_code == 200, merged.text
    svc.tick()


@pytest.mark.parametrize("shared", ["update", "root", "both"])
def test_every_holder_of_a_shared_commitment_is_audited(svc: Service, shared: str) -> None:
    """The copier commits first; both it and the island it copied are replayed, at rate 0,
    whichever of the update and the checkpoint root they share; a third island is not."""
    victim = _body(1, _digest("victim-update"), _digest("victim-root"))
    copy = {
        "update": _body(1, victim["update_sha256"], _digest("copier-root")),
        "root": _body(1, _digest("copier-update"), victim["checkpoint_root"]),
        "both": victim,
    }[shared]
    _round(svc, 1, {COPIER: copy, VICTIM: victim, OTHER: _body(1, _digest("o"), _digest("or"))})
    assert sorted(_assigned(svc, 1)) == sorted([COPIER.ss58_address, VICTIM.ss58_address])


def test_the_island_whose_assignment_made_the_bytes_keeps_them_and_the_copier_burns(
    svc: Service,
) -> None:
    """The copier's replay of its own assignment does not reach the victim's leaves: it is
    faulted, excluded and burned; the victim is merged and paid for the round."""
    victim = _body(1, _digest("victim-update"), _digest("victim-root"))
    _round(svc, 1, {COPIER: victim, VICTIM: victim, OTHER: _body(1, _digest("o"), _digest("or"))})
    _judge(svc, 1, {COPIER: "mismatch", VICTIM: "match"})
    _merge(svc, 1, included=[VICTIM, OTHER], excluded={COPIER: "audit_mismatch"})
    paid = svc.ledger.settled[(RUN, 1)]
    assert VICTIM.ss58_address in paid and COPIER.ss58_address not in paid, paid
    assert (RUN, 1, COPIER.ss58_address) in svc.ledger.faults


def test_distinct_commitments_force_nothing(svc: Service) -> None:
    """Without a shared update or root, rate 0 after probation audits nobody."""
    bodies = {k: _body(1, _digest(f"u1-{i}"), _digest(f"r1-{i}")) for i, k in enumerate(ISLANDS)}
    _round(svc, 1, bodies)
    assert _assigned(svc, 1) == {}
