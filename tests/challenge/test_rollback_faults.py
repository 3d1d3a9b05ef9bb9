"""A fault proven after the merge, by a real path, is published for the rollback.

The path: a lying auditor passes island 1, a dispute finds that auditor faulty, the pass
is set aside, the merge (which may include an island whose only verdict was set aside)
includes island 1, another auditor's re-audit finds the cheat, and the late verdict's
own dispute window closes undisputed. The fault is then a ``proven_faults`` row that
``GET /v1/runs/{run}/faults`` lists with ``merged`` and ``rollback_due``.
"""

from __future__ import annotations

from tests.challenge.test_disputes import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    REFEREE,
    RUN,
    WINDOW,
    Service,
    _commitment,
    _merge_round_0,
    _open_body,
    _to_verdict,
    _verdict_on,
    service,
)

__all__ = ["service"]


def _faults(svc: Service) -> list[dict[str, object]]:
    answer = svc.client.get(f"/v1/runs/{RUN}/faults")
    assert answer.status_code == 200, answer.text
    rows: list[dict[str, object]] = answer.json()
    return rows


def test_a_re_judged_audit_proves_a_merged_fault_and_the_rollback_is_due(
    service: Service,
) -> None:
    verdict_id, segment = _to_verdict(service)
    assert _verdict_on(service, AUDITOR, ISLANDS[1], "match").status_code == 200  # a lie
    opened = service.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    dispute_id = opened.json()["dispute_id"]
    answer = _commitment(opened.json()["game"], "island")
    service.post(f"/v1/disputes/{dispute_id}/answer", ISLANDS[0], "dispute-answer", answer)
    service.tick(4)  # the auditor misses its deadline: overturned
    # the referee's re-audit agrees with the island: the auditor is barred, its pass aside
    assert _verdict_on(service, REFEREE, ISLANDS[0], "match").status_code == 200
    service.tick(20)
    _merge_round_0(service)  # island 1's only verdict was set aside: it is merged
    service.tick()
    assert all(f["hotkey"] != ISLANDS[1].ss58_address for f in _faults(service))
    assert _verdict_on(service, OTHER_AUDITOR, ISLANDS[1], "mismatch").status_code == 200
    # the late verdict can still be disputed in its own window: not proven yet
    assert all(f["hotkey"] != ISLANDS[1].ss58_address for f in _faults(service))
    service.tick(WINDOW + 1)  # its own window closed undisputed: proven
    (late,) = [f for f in _faults(service) if f["hotkey"] == ISLANDS[1].ss58_address]
    assert (late["round"], late["merged"], late["rollback_due"]) == (0, True, True)
    assert str(late["reason"]).startswith("late mismatch verdict")
    assert (RUN, 0, ISLANDS[1].ss58_address) in service.ledger.faults  # burned once, here


def test_the_faults_route_refuses_an_unknown_run(service: Service) -> None:
    assert service.client.get("/v1/runs/nope/faults").status_code == 404
