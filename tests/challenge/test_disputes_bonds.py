"""Disputes through the service: the bond locked at open, returned when won, burned when lost."""

from __future__ import annotations

import pytest

from tests.challenge.dispute_scenario import (
    ISLANDS,
    OTHER_AUDITOR,
    RUN,
    Service,
    bonded,
    service,
    to_verdict,
    verdict_on,
)
from tests.challenge.disputeplay import commitment as _commitment
from tests.challenge.disputeplay import open_body as _open_body

__all__ = ["bonded", "service"]  # the fixtures, by name


def test_bond_is_locked_at_open_and_returned_when_the_dispute_is_won(bonded: Service) -> None:
    verdict_id, segment = to_verdict(bonded)
    body = _open_body(verdict_id, segment)
    bonded.ledger.settled[(RUN, 99)] = {ISLANDS[0].ss58_address: 500}  # escrow from earlier
    opened = bonded.post("/v1/disputes", ISLANDS[0], "dispute-open", body)
    assert opened.status_code == 200, opened.text
    dispute_id, game = opened.json()["dispute_id"], opened.json()["game"]
    assert opened.json()["bond"] == 100
    assert bonded.ledger.bonds == {dispute_id: (ISLANDS[0].ss58_address, 100, "locked")}
    island_answer = _commitment(game, "island")
    r = bonded.post(
        f"/v1/disputes/{dispute_id}/answer", ISLANDS[0], "dispute-answer", island_answer
    )
    assert r.status_code == 200, r.text
    bonded.tick(4)  # the auditor misses its deadline: the island wins, its bond comes back
    assert bonded.ledger.bonds[dispute_id][2] == "returned"
    bonded.tick()
    assert bonded.ledger.bonds[dispute_id][2] == "returned"  # settled once


@pytest.mark.parametrize("escrow", [0, 40])
def test_an_island_holding_less_than_the_bond_disputes_for_what_it_holds(
    bonded: Service, escrow: int
) -> None:
    """The bond never makes a verdict unanswerable: it is ``min(dispute.bond, escrow)``."""
    verdict_id, segment = to_verdict(bonded)
    if escrow:
        bonded.ledger.settled[(RUN, 99)] = {ISLANDS[0].ss58_address: escrow}
    opened = bonded.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    assert opened.status_code == 200, opened.text
    assert opened.json()["bond"] == escrow
    locked = {opened.json()["dispute_id"]: (ISLANDS[0].ss58_address, escrow, "locked")}
    assert bonded.ledger.bonds == (locked if escrow else {})
    again = bonded.post("/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment))
    assert (again.status_code, again.json()["error"]) == (409, "duplicate")  # once per verdict


def test_a_second_dispute_locks_only_the_escrow_no_bond_holds_yet(bonded: Service) -> None:
    verdict_id, segment = to_verdict(bonded)
    bonded.ledger.settled[(RUN, 99)] = {ISLANDS[0].ss58_address: 150}
    first = bonded.post("/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment))
    assert (first.status_code, first.json()["bond"]) == (200, 100), first.text
    other = verdict_on(bonded, OTHER_AUDITOR, ISLANDS[0], "mismatch")  # a second lie
    assert other.status_code == 200, other.text
    second = bonded.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(other.json()["verdict_id"], segment)
    )
    assert (second.status_code, second.json()["bond"]) == (200, 50), second.text


def test_bond_burns_when_the_island_loses(bonded: Service) -> None:
    verdict_id, segment = to_verdict(bonded)
    bonded.ledger.settled[(RUN, 99)] = {ISLANDS[0].ss58_address: 500}
    opened = bonded.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    assert opened.status_code == 200, opened.text
    dispute_id = opened.json()["dispute_id"]
    bonded.tick(4)  # the island never answers: upheld, the bond burns
    view = bonded.client.get(f"/v1/disputes/{dispute_id}").json()
    assert view["game"]["outcome"] == "upheld"
    assert bonded.ledger.bonds == {dispute_id: (ISLANDS[0].ss58_address, 100, "burned")}
