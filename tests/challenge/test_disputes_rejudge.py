"""Disputes through the service: what an honest auditor re-judges after a faulty one, or
after an audit missed its window."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hypertrain.auditor.disputes import answer_disputes
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    RUN,
    THIRD_AUDITOR,
    Service,
    addresses,
    bonded,
    dispute_run,
    service,
    stand_in_auditor,
    to_verdict,
    verdict_on,
)
from tests.challenge.disputeplay import commitment as _commitment
from tests.challenge.disputeplay import open_body as _open_body
from tests.challenge.helpers import AGGREGATOR

__all__ = ["bonded", "service"]  # the fixtures, by name


@pytest.fixture
def juried(tmp_path: Path) -> Iterator[Service]:
    """Three listed auditors (and the aggregator): each verdict's jury is the other two."""
    keys = addresses(AUDITOR, OTHER_AUDITOR, THIRD_AUDITOR, AGGREGATOR)
    with dispute_run(
        tmp_path, worker_hotkeys=keys, aggregator_hotkeys=addresses(AGGREGATOR)
    ) as svc:
        yield svc


def test_the_honest_auditor_rejudges_what_the_faulty_one_passed(
    juried: Service, tmp_path: Path
) -> None:
    service = juried
    verdict_id, segment = to_verdict(service)
    assert verdict_on(service, AUDITOR, ISLANDS[1], "match").status_code == 200
    opened = service.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    game, dispute_id = opened.json()["game"], opened.json()["dispute_id"]
    body = _commitment(game, "island")
    service.post(f"/v1/disputes/{dispute_id}/answer", ISLANDS[0], "dispute-answer", body)
    service.tick(4)  # overturned: the lying auditor's verdict waits for a re-audit
    events: list[tuple[str, dict[str, Any]]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append((kind, fields))

    own_judged: list[tuple[int, str]] = []
    answer_disputes(stand_in_auditor(service, AUDITOR, tmp_path, own_judged), {}, emit)
    assert own_judged == []  # an auditor never re-audits its own disputed verdict
    honest_judged: list[tuple[int, str]] = []
    honest = stand_in_auditor(service, OTHER_AUDITOR, tmp_path, honest_judged)
    assert answer_disputes(honest, {}, emit) == 1  # the disputed island: a match
    conn = service.client.app.state.service.conn  # type: ignore[attr-defined]
    assert conn.execute("SELECT auditor FROM faulty_auditors").fetchall() == []  # one word
    third = stand_in_auditor(service, THIRD_AUDITOR, tmp_path, [])
    assert answer_disputes(third, {}, emit) == 1  # the other juror agrees: a strict majority
    # the jury's majority agreed with the island: the auditor is faulty, its pass set aside
    assert answer_disputes(honest, {}, emit) == 1
    assert honest_judged == [(0, ISLANDS[0].ss58_address), (0, ISLANDS[1].ss58_address)]
    assert ("verdict", {"round": 0, "hotkey": ISLANDS[1].ss58_address, "result": "match",
            "reassigned_from": AUDITOR.ss58_address}) in events  # fmt: skip
    assert service.client.get(f"/v1/runs/{RUN}/reassigned").json() == []
    assert answer_disputes(honest, {}, emit) == 0  # nothing left to re-judge


def test_an_auditor_judges_an_audit_that_missed_its_window(
    service: Service, tmp_path: Path
) -> None:
    """A held reward always has someone tasked with ending it: an assignment with no
    verdict when its audit phase ended is offered at ``/reassigned`` (``missed``), and an
    auditor's dispute pass judges it; the queue is then empty."""
    to_verdict(service)  # island 1 is never judged inside the audit window
    assert service.client.get(f"/v1/runs/{RUN}/reassigned").json() == []  # still in time
    service.tick(40)  # the audit window is over
    assert service.client.get(f"/v1/runs/{RUN}/rounds/0").json()["phase"] != "audit"
    (missed,) = service.client.get(f"/v1/runs/{RUN}/reassigned").json()
    assert (missed["hotkey"], missed["missed"], missed["verdict_id"]) == (
        ISLANDS[1].ss58_address, True, "",
    )  # fmt: skip
    judged: list[tuple[int, str]] = []
    events: list[tuple[str, dict[str, Any]]] = []
    auditor = stand_in_auditor(service, OTHER_AUDITOR, tmp_path, judged)
    assert answer_disputes(auditor, {}, lambda kind, **f: events.append((kind, f))) == 1
    assert judged == [(0, ISLANDS[1].ss58_address)]
    assert service.client.get(f"/v1/runs/{RUN}/reassigned").json() == []


def test_an_auditor_that_lost_a_game_still_rejudges_others_audits(
    service: Service, tmp_path: Path
) -> None:
    """Losing one game (a slow machine) bars nobody, so it does not stop the auditor from
    judging what ``/reassigned`` offers it: here a missed audit of the other island."""
    verdict_id, segment = to_verdict(service)
    opened = service.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    game, dispute_id = opened.json()["game"], opened.json()["dispute_id"]
    body = _commitment(game, "island")
    service.post(f"/v1/disputes/{dispute_id}/answer", ISLANDS[0], "dispute-answer", body)
    service.tick(40)  # the auditor was silent (overturned) and island 1 missed its window
    assert service.client.get(f"/v1/disputes/{dispute_id}").json()["game"]["outcome"] == (
        "overturned"
    )
    judged: list[tuple[int, str]] = []
    answer_disputes(
        stand_in_auditor(service, AUDITOR, tmp_path, judged), {}, lambda kind, **f: None
    )
    assert judged == [(0, ISLANDS[1].ss58_address)]  # never its own set-aside verdict
