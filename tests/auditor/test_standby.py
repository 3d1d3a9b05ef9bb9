"""A standby juror (``auditor run --follow --standby``) judges nothing first: it only
re-audits what the service lists as waiting.

The service is the real one; the segment replay is stood in for (as in
tests/challenge/test_disputes.py), and it records what the juror was asked to judge.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypertrain.auditor.follow import follow
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    RUN,
    Service,
    lose_by_silence,
    service,
    stand_in_auditor,
    to_verdict,
)

__all__ = ["service"]  # the fixture, by name


def _one_pass() -> Callable[[], bool]:
    """A ``stop`` for :func:`follow` that lets exactly one pass run."""
    answers = iter([False, True])
    return lambda: next(answers)


def _quiet(kind: str, **fields: Any) -> None:
    """An ``emit`` that drops the juror's events."""


def _standby_pass(svc: Service, tmp: Path) -> list[tuple[int, str]]:
    judged: list[tuple[int, str]] = []
    juror = stand_in_auditor(svc, OTHER_AUDITOR, tmp, judged)
    follow(juror, poll_s=0, stop=_one_pass(), emit=_quiet, standby=True)
    return judged


def test_a_standby_juror_judges_no_assignment_first(service: Service, tmp_path: Path) -> None:
    to_verdict(service)  # round 0 in its audit phase; island 1 not judged yet
    assert _standby_pass(service, tmp_path) == []
    verdicts = service.client.get(f"/v1/runs/{RUN}/rounds/0").json()["verdicts"]
    assert {v["envelope"]["signer"] for v in verdicts} == {AUDITOR.ss58_address}


def test_a_standby_juror_re_audits_a_verdict_set_aside(service: Service, tmp_path: Path) -> None:
    verdict_id, segment = to_verdict(service)
    lose_by_silence(service, verdict_id, segment, ISLANDS[0])
    service.tick(4)  # the auditor missed its answer: the game is overturned, the verdict aside
    assert _standby_pass(service, tmp_path) == [(0, ISLANDS[0].ss58_address)]
    assert service.client.get(f"/v1/runs/{RUN}/reassigned").json() == []
