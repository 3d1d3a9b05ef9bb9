"""A fault proven after the merge, by a real path, is published for the rollback.

The path: a lying auditor passes island 1, a dispute finds that auditor faulty, the pass
is set aside, the merge (which may include an island whose only verdict was set aside)
includes island 1, another auditor's re-audit finds the cheat, and the late verdict's
own dispute window closes undisputed. The fault is then a ``proven_faults`` row that
``GET /v1/runs/{run}/faults`` lists with ``merged`` and ``rollback_due``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    REFEREE,
    RUN,
    THIRD_AUDITOR,
    WINDOW,
    Service,
    addresses,
    dispute_run,
    lose_by_silence,
    merge_round_0,
    service,
    to_verdict,
    verdict_on,
)
from tests.challenge.helpers import AGGREGATOR

__all__ = ["service"]


def _faults(svc: Service) -> list[dict[str, object]]:
    answer = svc.client.get(f"/v1/runs/{RUN}/faults")
    assert answer.status_code == 200, answer.text
    rows: list[dict[str, object]] = answer.json()
    return rows


def test_a_re_judged_audit_proves_a_merged_fault_and_the_rollback_is_due(
    service: Service,
) -> None:
    verdict_id, segment = to_verdict(service)
    assert verdict_on(service, AUDITOR, ISLANDS[1], "match").status_code == 200  # a lie
    lose_by_silence(service, verdict_id, segment)
    service.tick(4)  # the auditor misses its deadline: overturned
    # the referee's re-audit agrees with the island: the auditor is barred, its pass aside
    assert verdict_on(service, REFEREE, ISLANDS[0], "match").status_code == 200
    service.tick(20)
    merge_round_0(service)  # island 1's only verdict was set aside: it is merged
    service.tick()
    assert all(f["hotkey"] != ISLANDS[1].ss58_address for f in _faults(service))
    assert verdict_on(service, OTHER_AUDITOR, ISLANDS[1], "mismatch").status_code == 200
    # the late verdict can still be disputed in its own window: not proven yet
    assert all(f["hotkey"] != ISLANDS[1].ss58_address for f in _faults(service))
    service.tick(WINDOW + 1)  # its own window closed undisputed: proven
    (late,) = [f for f in _faults(service) if f["hotkey"] == ISLANDS[1].ss58_address]
    assert (late["round"], late["merged"], late["rollback_due"]) == (0, True, True)
    assert str(late["reason"]).startswith("late mismatch verdict")
    assert (RUN, 0, ISLANDS[1].ss58_address) in service.ledger.faults  # burned once, here


def test_the_faults_route_refuses_an_unknown_run(service: Service) -> None:
    assert service.client.get("/v1/runs/nope/faults").status_code == 404


WAIT = 30  # the dispute window of the run below


@pytest.fixture
def windowed(tmp_path: Path) -> Iterator[Service]:
    """Three listed auditors (each verdict's jury is the other two), a 30-round window."""
    keys = addresses(AUDITOR, OTHER_AUDITOR, THIRD_AUDITOR, AGGREGATOR)
    with dispute_run(
        tmp_path,
        dispute_window_rounds=WAIT,
        worker_hotkeys=keys,
        aggregator_hotkeys=addresses(AGGREGATOR),
    ) as svc:
        yield svc


def _lost_after_the_audit_phase(svc: Service) -> None:
    """The auditor passed island 1 (a lie) and loses island 0's game after the audit phase."""
    verdict_id, segment = to_verdict(svc)
    assert verdict_on(svc, AUDITOR, ISLANDS[1], "match").status_code == 200
    svc.tick(21)  # the audit window ends with the auditor's verdicts alone
    merge_round_0(svc)
    lose_by_silence(svc, verdict_id, segment)
    svc.tick(4)  # the auditor misses its deadline: overturned, its verdict set aside


def _phase(svc: Service) -> str:
    phase: str = svc.client.get(f"/v1/runs/{RUN}/rounds/0").json()["phase"]
    return phase


def test_a_round_waits_for_its_lost_games_re_audits_before_it_settles(
    windowed: Service,
) -> None:
    """Past the round's dispute deadline, the game decided late still gathers its jury's
    re-audits: the round waits, so barring can still set the liar's pass of island 1
    aside, and the jurors' re-audit proves island 1's fault after the merge."""
    svc = windowed
    _lost_after_the_audit_phase(svc)
    svc.tick(WAIT - 3)  # past the round's deadline (audit close + 30), within one window
    assert _phase(svc) == "settle"  # waiting for the re-audits of the lost game
    for juror in (OTHER_AUDITOR, THIRD_AUDITOR):  # both agree with island 0: barred
        assert verdict_on(svc, juror, ISLANDS[0], "match").status_code == 200
    waiting = svc.client.get(f"/v1/runs/{RUN}/reassigned").json()
    assert [w["hotkey"] for w in waiting] == [ISLANDS[1].ss58_address]  # the lie, set aside
    for juror in (OTHER_AUDITOR, THIRD_AUDITOR):  # the re-audit finds the cheat
        assert verdict_on(svc, juror, ISLANDS[1], "mismatch").status_code == 200
    svc.tick(WAIT + 1)  # the late verdict's own window closes undisputed
    assert _phase(svc) == "final"
    (fault,) = [f for f in _faults(svc) if f["hotkey"] == ISLANDS[1].ss58_address]
    assert (fault["round"], fault["merged"], fault["rollback_due"]) == (0, True, True)


def test_a_silent_jury_holds_the_round_one_window_at_most(windowed: Service) -> None:
    svc = windowed
    _lost_after_the_audit_phase(svc)
    svc.tick(WAIT - 3)
    assert _phase(svc) == "settle"
    svc.tick(4)  # one window after the game's decision: nobody re-audited, it settles
    assert _phase(svc) == "final"
