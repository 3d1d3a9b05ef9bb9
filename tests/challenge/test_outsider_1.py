"""Outsider attacks on disputes and the service: each test shows a documented claim failing.

Every test here reproduces an attack found from the documentation alone and is expected to
fail on the code it was written against; it passes once the claim it quotes holds.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.challenge.dispute_scenario import (
    AUDITOR,
    BOUND,
    ISLANDS,
    OTHER_AUDITOR,
    RUN,
    Service,
    assignment,
    commit_round_0,
    merge,
    merge_round_0,
    open_and_commit,
    post_tape,
    post_verdict,
    send_verdict,
    service,
    started,
    tape,
    to_verdict,
    verdict_on,
)
from tests.challenge.disputeplay import commitment as _commitment
from tests.challenge.disputeplay import open_body as _open_body
from tests.challenge.helpers import manifest_doc

__all__ = ["service"]  # the dispute run's fixture


def test_a_reaudit_mismatch_after_a_won_game_can_be_disputed(service: Service) -> None:
    """docs/mechanism.md: "A mismatch verdict is a fault only if it survives a dispute."

    The island wins its game (the auditor is silent), the verdict is re-assigned, and the
    re-audit arrives after the dispute window (the only time it can, once the round has
    merged): its mismatch faults the island at once and the island's dispute of it is
    refused ``late``. Any second worker key can thus fault an island that has just won,
    with no game.
    """
    verdict_id, segment = to_verdict(service)
    opened = service.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    dispute_id, game = opened.json()["dispute_id"], opened.json()["game"]
    service.post(
        f"/v1/disputes/{dispute_id}/answer",
        ISLANDS[0],
        "dispute-answer",
        _commitment(game, "island"),
    )
    service.tick(4)  # the auditor misses its deadline: overturned, re-assigned
    assert service.client.get(f"/v1/disputes/{dispute_id}").json()["game"]["outcome"] == (
        "overturned"
    )
    service.tick(20)  # past the dispute window
    merge_round_0(service)
    service.tick()
    reaudit = verdict_on(service, OTHER_AUDITOR, ISLANDS[0], "mismatch")
    assert reaudit.status_code == 200, reaudit.text
    second = service.post(
        "/v1/disputes",
        ISLANDS[0],
        "dispute-open",
        _open_body(reaudit.json()["verdict_id"], segment),
    )
    assert second.status_code == 200, f"the re-audit's mismatch is not disputable: {second.text}"


def test_a_late_mismatch_verdict_can_be_disputed_before_it_faults(service: Service) -> None:
    """docs/challenge-routes.md accepts a verdict after the audit window for an assignment
    without one; docs/mechanism.md says a mismatch is a fault only if it survives a dispute.

    A mismatch posted after the dispute window faults the island at once, and the island's
    dispute is refused ``late``: the fault never had a dispute window.
    """
    to_verdict(service)  # island 1's assignment has no verdict yet
    service.tick(40)  # past audit close and the dispute window
    merge_round_0(service)
    service.tick()
    late = verdict_on(service, OTHER_AUDITOR, ISLANDS[1], "mismatch")
    assert late.status_code == 200, late.text
    segment = assignment(service, ISLANDS[1])["segments"][0]
    opened = service.post(
        "/v1/disputes", ISLANDS[1], "dispute-open", _open_body(late.json()["verdict_id"], segment)
    )
    assert opened.status_code == 200, f"a late mismatch is not disputable: {opened.text}"


def test_a_recompute_dispute_is_decided_within_the_documented_bound(service: Service) -> None:
    """docs/mechanism.md: a ``recompute`` dispute without a re-audit is upheld "by
    ``Rules.bound_rounds()`` after the opening" (2 x clock_rounds + referee_rounds x
    (1 + referee_extensions)), so it holds settlement at most that long."""
    mine = commit_round_0(service)
    v = post_verdict(service, AUDITOR, ISLANDS[0], "mismatch", first_bad_leaf=0, check="start")
    assert v.status_code == 200, v.text
    body = _open_body(v.json()["verdict_id"], mine["segments"][0])
    opened = service.post("/v1/disputes", ISLANDS[0], "dispute-open", body)
    assert opened.status_code == 200, opened.text
    dispute_id = opened.json()["dispute_id"]
    opened_at = service.client.get(f"/v1/disputes/{dispute_id}").json()["opened_beacon_round"]
    service.tick(BOUND)  # no re-audit comes: every round of the bound passes
    view = service.client.get(f"/v1/disputes/{dispute_id}").json()
    assert view["game"]["outcome"] == "upheld", (
        f"opened at {opened_at}, still undecided at {service.beacon.round}"
        f" ({service.beacon.round - opened_at} rounds, bound {BOUND})"
    )


# mismatch verdicts whose check fields name nothing a dispute can contest (leaf_count 5)
UNDISPUTABLE = [
    pytest.param({}, id="no-check-no-leaf"),
    pytest.param({"check": "segment"}, id="segment-without-leaf"),
    pytest.param({"check": "segment", "first_bad_leaf": 0}, id="segment-at-leaf-0"),
    pytest.param({"check": "update"}, id="update-without-leaf"),
    pytest.param({"first_bad_leaf": 99}, id="leaf-past-the-tree"),
    pytest.param({"check": "segment", "first_bad_leaf": 3}, id="leaf-of-an-unaudited-segment"),
]


@pytest.mark.parametrize("fields", UNDISPUTABLE)
def test_a_mismatch_verdict_is_either_refused_or_disputable(
    service: Service, fields: dict[str, Any]
) -> None:
    """docs/mechanism.md: "A mismatch verdict is a fault only if it survives a dispute",
    and a dispute contests "the check the verdict names as first failing".

    The service accepts mismatch verdicts whose ``check`` / ``first_bad_leaf`` name no
    audited check (none at all, leaf 0 for a segment, a leaf past the tree, the end of a
    segment that was not audited), and then refuses every dispute of them
    (``not_first_difference`` or ``bad_segment``): such a verdict faults the island with
    no game. Either the verdict must be refused, or one dispute of it admissible.
    """
    commit_round_0(service)
    posted = post_verdict(service, AUDITOR, ISLANDS[0], "mismatch", **fields)
    if posted.status_code != 200:
        return  # refused at the door: no undisputable fault
    refusals = []
    for segment in range(4):  # every segment of the island's committed tree
        body = _open_body(posted.json()["verdict_id"], segment)
        opened = service.post("/v1/disputes", ISLANDS[0], "dispute-open", body)
        if opened.status_code == 200:
            return
        refusals.append((segment, opened.json()["error"]))
    raise AssertionError(f"accepted mismatch verdict {fields} cannot be disputed: {refusals}")


def test_an_unverifiable_verdict_on_a_served_island_can_be_contested(service: Service) -> None:
    """docs/mechanism.md: "A mismatch verdict is a fault only if it survives a dispute";
    ``unverifiable`` is "a fault of the island exactly like mismatch", and cannot be
    disputed at all (``not_mismatch``).

    So a lying auditor never needs a mismatch: it signs ``unverifiable`` for an honest
    island whose bytes are all served, the island is faulted and burned, no game is
    possible and the auditor is never barred. The dispute mechanism (first difference,
    commit-reveal, re-audits) is bypassed by choosing the other verdict word.
    """
    mine = commit_round_0(service)
    posted = post_verdict(
        service, AUDITOR, ISLANDS[0], "unverifiable", detail="index withheld (a lie)"
    )
    assert posted.status_code == 200, posted.text
    body = _open_body(posted.json()["verdict_id"], mine["segments"][-1])
    opened = service.post("/v1/disputes", ISLANDS[0], "dispute-open", body)
    assert opened.status_code == 200, f"an unverifiable verdict cannot be contested: {opened.text}"


def test_a_merge_tape_that_includes_an_unjudged_or_faulted_island_is_refused(
    service: Service,
) -> None:
    """docs/threats.md (Merge collection): "an assigned audit without a verifiable verdict
    is excluded (``audit_pending``)", and a faulted island's update "is not merged".

    The service records whatever the aggregator's tape says: a tape that includes island 0
    (standing mismatch) and island 1 (assigned, no verdict) is accepted, so the next
    round's start model carries a cheater's and an unjudged update, and the public round
    record lists both as included. The service holds every input needed to refuse it.
    """
    to_verdict(service)  # island 0 judged mismatch, island 1 assigned and unjudged
    service.tick(40)  # past audit close and the dispute window
    merged = post_tape(service, tape(0, included=sorted(k.ss58_address for k in ISLANDS)))
    assert merged.status_code >= 400, (
        f"a tape merging unverified updates was accepted: {merged.text}"
    )


def test_a_fault_proven_late_does_not_let_the_cheater_farm_the_next_round(tmp_path: Any) -> None:
    """docs/mechanism.md (Audit selection): "a caught cheater that stays registered is
    replayed every round and never sampled at the rate, so a fault cannot be followed by
    farming unaudited rounds."

    Round 0: island 0 (on probation) is assigned but its verdict is late, so round 0
    settles with its reward held. Round 1 opens and is selected while island 0 has no
    fault yet and is out of probation: at rate 0 it is not audited. The late mismatch
    for round 0 then arrives (island 0 is now faulted), and round 1 still settles paying
    island 0 in full, with no hold: the cheater earns an unaudited round after its fault.
    """
    doc = manifest_doc(RUN, rate=0.0, segments=1)
    doc["dispute"] = {"bond": 0}
    with started(tmp_path, doc) as svc:
        round0 = commit_round_0(svc)  # island 0's assignment, still without a verdict
        post_verdict(svc, AUDITOR, ISLANDS[1], "match")
        svc.tick(30)
        merge(svc, 0, pending=True)  # as the aggregator leaves out the unjudged islands
        svc.tick()
        open_and_commit(svc, 1)
        late = {**round0, "result": "mismatch", "first_bad_leaf": round0["segments"][0] + 1}
        late.pop("selection_beacon_round")
        posted = send_verdict(svc, AUDITOR, late)
        assert posted.status_code == 200, posted.text
        svc.tick(30)  # the late verdict's own dispute window closes undisputed: a fault
        assert (RUN, 0, ISLANDS[0].ss58_address) in svc.ledger.faults
        merge(svc, 1)
        svc.tick()
        paid = svc.ledger.settled[(RUN, 1)]
        held = svc.ledger.held[(RUN, 1)]
        cheater = ISLANDS[0].ss58_address
        assert cheater not in paid or cheater in held, (
            f"faulted island paid for unaudited round 1: {paid}, held {held}"
        )
