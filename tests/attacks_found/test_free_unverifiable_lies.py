"""A lying auditor's ``unverifiable`` costs it nothing, so it repeats until a juror is away.

docs/threats.md (Disputes): the attack "A lying auditor signs ``unverifiable`` for an island
whose bytes were all served: a fault no dispute can contest, so the auditor is never
checked" is answered by a ``recompute`` dispute; docs/mechanism.md: an overturned
``unverifiable`` verdict "never bars its auditor", and "Without a quorum by the deadline
the verdict stands". The honest-majority table: with three listed auditors one dishonest
auditor "can do nothing alone".

So the liar is still never checked: a quorum overturning its lie changes nothing for it,
and it may sign the same lie on the same honest island in the next round, and the next,
at no risk. The island must win every one of these disputes, each needing every honest
juror's re-audit in time; the first round one honest juror is away (a restart, a slow
replay, or a stalled loop, atk4-4), the lie stands: the honest island is faulted, its
unpaid escrow burned and (docs: forfeiture) everything it earns later in the run
forfeited. Played on the real service with three listed auditors: B lies, A and C are
honest, the island H is honest.
"""

from __future__ import annotations

from typing import Any

from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    RUN,
    THIRD_AUDITOR,
    Service,
    barred,
    commit_round_0,
    judge,
    open_and_commit,
    post_tape,
    send_verdict,
    split_tape,
    three,
    verdict_body,
)
from tests.challenge.disputeplay import open_body

__all__ = ["three"]  # the fixture, by name

HONEST_A, LIAR_B, HONEST_C = AUDITOR, OTHER_AUDITOR, THIRD_AUDITOR
HONEST_ISLAND = ISLANDS[0]


def _lie(svc: Service, index: int) -> tuple[Any, list[int]]:
    """B's ``unverifiable`` on H in round ``index``: the answer, H's assigned segments."""
    body = verdict_body(svc, HONEST_ISLAND, "unverifiable", index=index, detail="index withheld")
    return send_verdict(svc, LIAR_B, body), sorted(body["segments"])


def _lie_and_dispute(svc: Service, index: int, jurors: tuple[Hotkey, ...]) -> str:
    """B signs ``unverifiable`` on H, A and C judge the other island; H disputes; the
    ``jurors`` re-audit H (``match``: every byte was served). A liar barred by an
    earlier quorum is refused (``faulty_auditor``): its lie never enters."""
    lie, segments = _lie(svc, index)
    for key in (HONEST_A, HONEST_C):
        judge(svc, key, ISLANDS[1], "match", index=index)
    if lie.status_code == 403 and lie.json()["error"] == "faulty_auditor":
        svc.tick(60)
        return "refused"
    assert lie.status_code == 200, lie.text
    verdict_id = lie.json()["verdict_id"]
    body = open_body(verdict_id, segments[-1], round=index)
    opened = svc.post("/v1/disputes", HONEST_ISLAND, "dispute-open", body)
    assert opened.status_code == 200, opened.text
    for key in jurors:
        judge(svc, key, HONEST_ISLAND, "match", index=index)
    svc.tick(60)  # past the game's bound
    dispute_id: str = opened.json()["dispute_id"]
    return str(svc.client.get(f"/v1/disputes/{dispute_id}").json()["game"]["outcome"])


def _merge(svc: Service, index: int) -> None:
    body = split_tape(svc, index, new_model_sha256="aa" * 32, tape_sha256=f"{index:02d}" * 32)
    m = post_tape(svc, body)
    assert m.status_code == 200, m.text
    svc.tick(10)


def test_a_liar_overturned_by_a_quorum_cannot_lie_again_until_a_juror_is_away(
    three: Service,
) -> None:
    """Proves an auditor whose ``unverifiable`` a quorum proved false cannot go on faulting
    the same honest island round after round until one honest juror misses a deadline."""
    svc = three
    commit_round_0(svc)
    assert _lie_and_dispute(svc, 0, (HONEST_A, HONEST_C)) == "overturned"  # the quorum
    _merge(svc, 0)
    open_and_commit(svc, 1)
    outcome = _lie_and_dispute(svc, 1, (HONEST_A,))  # C is away this round
    _merge(svc, 1)
    faulted = [f for f in svc.ledger.faults if f[2] == HONEST_ISLAND.ss58_address]
    assert not faulted, (
        f"the same lie, overturned by a quorum in round 0, stood in round 1 ({outcome}) with"
        f" one honest juror away: the honest island is faulted {faulted}"
    )


def test_a_lie_no_quorum_decided_while_the_only_reaudit_matches_holds_and_never_burns(
    three: Service,
) -> None:
    """Proves a ``recompute`` dispute that ends without a quorum, while the one juror who
    re-audited found ``match`` and none agreed with the verdict, holds the island's reward
    (fail closed on payment) instead of faulting and burning it."""
    svc = three
    commit_round_0(svc)
    outcome = _lie_and_dispute(svc, 0, (HONEST_A,))  # C is away
    assert outcome == "held"
    _merge(svc, 0)
    assert not [f for f in svc.ledger.faults if f[2] == HONEST_ISLAND.ss58_address]
    assert HONEST_ISLAND.ss58_address in svc.ledger.held[(RUN, 0)]
    assert LIAR_B.ss58_address not in barred(svc)  # one juror's word bars nobody
