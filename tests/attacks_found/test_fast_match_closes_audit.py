"""A fast colluding auditor closes the audit phase with ``match`` before an honest one can judge.

docs/auditor.md: "A round's audit phase closes as soon as every selected island has a verdict
(or when the audit window ends) ... Several auditors may run; the first verdict per assignment
counts toward closing the phase." docs/challenge-routes.md: a verdict is "accepted in ``audit``
phase while the due round is before ``audit_close_round``, and afterwards for an assignment
that has no verdict yet". docs/mechanism.md: "any verdict other than ``match`` ... faulted".

So a listed auditor that colludes with a cheating island posts ``match`` for every selected
island the moment the selection is signed (no replay needed). The phase closes at once, well
inside the audit window, and the honest auditor's ``mismatch`` on the cheater, arriving while
the window is still open by the schedule, is refused: the cheater is merged and paid, and
nothing can ever fault it (a ``match`` cannot be disputed).

The network here is the real challenge service (HTTP routes, signed envelopes).
"""

from __future__ import annotations

from typing import Any

from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    RUN,
    Service,
    commit_round_0,
    send_verdict,
    service,
    verdict_body,
)

__all__ = ["service"]  # audit window of 20 beacon rounds, audit rate 1

HONEST, COLLUDER = AUDITOR, OTHER_AUDITOR


def _verdict(svc: Service, auditor: Hotkey, island: Hotkey, result: str) -> Any:
    body = verdict_body(svc, island, result, update_checked=True)
    if result == "mismatch":
        body |= {"first_bad_leaf": body["segments"][0] + 1, "check": "segment"}
    return send_verdict(svc, auditor, body)


def test_an_honest_mismatch_inside_the_audit_window_is_not_shut_out_by_a_faster_match(
    service: Service,
) -> None:
    """Proves a fast ``match`` from one auditor does not close the audit phase before
    another auditor's ``mismatch`` inside the audit window is heard."""
    cheater = ISLANDS[0]
    commit_round_0(service)  # both islands committed, selection signed
    for island in ISLANDS:  # the colluder "judges" everyone at once, with no replay
        assert _verdict(service, COLLUDER, island, "match").status_code == 200
    service.tick()  # one beacon round later, deep inside the 20-round audit window
    detail = service.client.get(f"/v1/runs/{RUN}/rounds/0").json()
    honest = _verdict(service, HONEST, cheater, "mismatch")  # the honest replay's result
    assert honest.status_code == 200, (
        f"round 0 is in phase {detail['phase']!r} one beacon round after the selection; the"
        f" honest auditor's mismatch on the cheater is refused: {honest.text}"
    )
