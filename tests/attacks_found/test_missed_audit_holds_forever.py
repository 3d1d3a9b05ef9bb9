"""One audit that misses its window holds an honest island's rewards for the rest of the run.

docs/mechanism.md (Settlement from proof): an island whose assigned audit has no verdict is
"held ... with a hold that never releases on its own", and every later round of it is
"held (earlier round)" while "an assigned audit of the same island in an earlier round of
the run has no judging verdict yet". docs/challenge-routes.md accepts such a late verdict,
but docs/auditor.md: ``--follow`` "audits each round once, when it reaches its audit phase"
(the runner skips every round whose phase is not ``audit``), and the only later queue it
polls is ``GET /v1/runs/{run}/reassigned``, which lists only verdicts set aside by a dispute.

So when the auditor misses one island's audit window (a restart, a relay hiccup past its
``max_attempts``, a slow replay of other islands), nobody ever posts that verdict: the honest
island's reward for that round and for every later round, all of them ``match``, is held
forever. A competitor able to delay one audit (or an auditor that simply skips one island)
freezes the island's income for good, with no fault and nothing to dispute.
"""

from __future__ import annotations

from hypertrain.challenge.settlement.settle import PENDING_AUDIT
from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    RUN,
    Service,
    commit_round_0,
    merge,
    open_and_commit,
    post_verdict,
    service,
)

__all__ = ["service"]  # the real service on a stepped beacon (audit rate 1)


def _match(svc: Service, index: int, island: Hotkey) -> None:
    r = post_verdict(svc, AUDITOR, island, "match", index=index, update_checked=True)
    assert r.status_code == 200, r.text


def test_one_missed_audit_window_does_not_hold_an_honest_island_forever(
    service: Service,
) -> None:
    """Proves an assigned audit that missed its window is offered to the auditors again
    (``/reassigned``), so the hold on the island always has someone tasked with ending it."""
    honest, victim = ISLANDS
    commit_round_0(service)
    _match(service, 0, honest)  # the auditor judged one island, then was down past the window
    service.tick(30)
    phase = service.client.get(f"/v1/runs/{RUN}/rounds/0").json()["phase"]
    assert phase != "audit", phase  # an auditor's --follow never looks at round 0 again
    merge(service, 0, pending=True)
    service.tick()
    for index in (1, 2, 3):  # the auditor is back: every later audit of the victim matches
        open_and_commit(service, index)
        for island in ISLANDS:
            _match(service, index, island)
        service.tick(30)
        merge(service, index)
        service.tick()
    service.tick(500)  # far past every window and dispute bound of the run
    held = {i: service.ledger.held[(RUN, i)].get(victim.ss58_address) for i in range(4)}
    queued = [
        (q["round"], q["hotkey"]) for q in service.client.get(f"/v1/runs/{RUN}/reassigned").json()
    ]
    offered = (0, victim.ss58_address) in queued
    assert offered or held[3] != PENDING_AUDIT, (
        "an honest island whose one audit missed its window is held in every later round"
        f" ({held}), and the unjudged audit is offered to no auditor (reassigned: {queued})"
    )
