"""One lying auditor among honest ones faults nobody, even when the island never disputes.

docs/mechanism.md (Disputes, the honest-majority table): with 3 listed auditors "one
dishonest auditor: nothing alone". A fault stands only on the jury's word: the liar's
``unverifiable`` against two ``match`` verdicts is outvoted by the phase's own verdicts
(the island is paid, no dispute needed); against one ``match`` with the third auditor
silent no majority exists either way and the island is held (never paid on one word,
never burned on none). Played against the real service with no island software
running (no relay is read).
"""

from __future__ import annotations

import pytest

from hypertrain.challenge import facts
from hypertrain.challenge.rule import PENDING_AUDIT
from hypertrain.challenge.store import game_storage
from hypertrain.dispute.game import Rules, decide
from hypertrain.dispute.narrowing import Actor
from hypertrain.dispute.resolution import open_recompute
from tests.challenge.dispute_scenario import (
    HONEST,
    LIAR,
    OTHER_AUDITOR,
    RUN,
    THIRD_AUDITOR,
    WITHHELD,
    Service,
    merge_and_settle,
    post_verdict,
    round_0_with_a_lie,
    send_verdict,
    three,
)
from tests.challenge.helpers import bearer

__all__ = ["three"]
RELAY = "http://relay"  # only named in the commits: no island software runs here


def _match_all(svc: Service, auditors: tuple[object, ...], only: str | None = None) -> None:
    assigned = svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/0/assignments", headers=bearer("worker")
    ).json()
    for body in (a["body"] for a in assigned if only in (None, a["body"]["hotkey"])):
        for auditor in auditors:
            verdict = {**body, "result": "match", "update_checked": True}
            verdict.pop("selection_beacon_round")
            r = send_verdict(svc, auditor, verdict)  # type: ignore[arg-type]
            assert r.status_code == 200, r.text


def test_a_lie_outvoted_by_two_matches_faults_nothing_without_a_dispute(three: Service) -> None:
    """Proves the two honest ``match`` verdicts outvote the liar: the island is paid."""
    round_0_with_a_lie(three, RELAY, WITHHELD, serve=False)
    _match_all(three, (OTHER_AUDITOR, THIRD_AUDITOR))
    three.tick(30)  # the audit phase closes at its window
    merge_and_settle(three)
    assert three.client.get("/v1/disputes", params={"run_id": RUN}).json() == []
    assert not [f for f in three.ledger.faults if f[2] == HONEST.ss58_address]
    assert HONEST.ss58_address in three.ledger.settled[(RUN, 0)]
    held = three.ledger.held.get((RUN, 0), {}).get(HONEST.ss58_address)
    assert held != PENDING_AUDIT  # at most its probation holds it, never the lie


def test_one_match_one_lie_one_silent_holds_and_never_burns(three: Service) -> None:
    """Proves no majority either way holds the island's reward and burns nothing."""
    round_0_with_a_lie(three, RELAY, WITHHELD, serve=False)
    _match_all(three, (OTHER_AUDITOR,))
    three.tick(30)  # the audit phase closes at its window
    merge_and_settle(three)
    assert not [f for f in three.ledger.faults if f[2] == HONEST.ss58_address]
    assert three.ledger.held[(RUN, 0)][HONEST.ss58_address] == PENDING_AUDIT


def test_a_split_keeps_the_audit_phase_open_for_the_third_auditor(three: Service) -> None:
    """Proves the liar's word and one ``match`` do not close the audit phase early: the
    third auditor's later ``match`` is taken and outvotes the lie."""
    round_0_with_a_lie(three, RELAY, WITHHELD, serve=False)
    _match_all(three, (OTHER_AUDITOR,))
    three.tick(1)
    phase = three.client.get(f"/v1/runs/{RUN}/rounds").json()[0]["phase"]
    assert phase == "audit", phase
    _match_all(three, (THIRD_AUDITOR,))
    three.tick(30)
    merge_and_settle(three)
    assert not [f for f in three.ledger.faults if f[2] == HONEST.ss58_address]
    held = three.ledger.held.get((RUN, 0), {}).get(HONEST.ss58_address)
    assert held != PENDING_AUDIT


def test_the_outvoted_liar_is_barred_by_the_one_rule(three: Service) -> None:
    """Proves an outvoted ``unverifiable`` counts against its auditor: two timely ``match``
    verdicts of its jury bar it (its later verdicts are refused ``faulty_auditor``); one
    ``match`` alone bars nobody."""
    round_0_with_a_lie(three, RELAY, WITHHELD, serve=False)
    _match_all(three, (OTHER_AUDITOR,))
    assert not _barred(three)  # a split: no majority, no barring
    _match_all(three, (THIRD_AUDITOR,))
    assert _barred(three)


def _barred(svc: Service) -> bool:
    """The liar posts again on the same audit: ``duplicate`` while it counts, else barred."""
    r = post_verdict(svc, LIAR, HONEST, "match", update_checked=True)
    code = r.json().get("error")
    assert code in ("duplicate", "faulty_auditor"), r.text
    return bool(code == "faulty_auditor")


def test_a_split_settled_held_is_decided_by_the_third_auditors_late_verdict(
    three: Service,
) -> None:
    """Proves a split round's hold ends when the absent auditor's late ``match`` makes
    the majority (its juror's earlier verdicts count towards the late quorum)."""
    round_0_with_a_lie(three, RELAY, WITHHELD, serve=False)
    _match_all(three, (OTHER_AUDITOR,))
    three.tick(30)
    merge_and_settle(three)
    assert three.ledger.held[(RUN, 0)][HONEST.ss58_address] == PENDING_AUDIT
    listed = three.client.get(f"/v1/runs/{RUN}/reassigned").json()
    assert [q["hotkey"] for q in listed] == [HONEST.ss58_address]  # the third is asked
    _match_all(three, (THIRD_AUDITOR,), HONEST.ss58_address)  # late: the round is final
    assert not [f for f in three.ledger.faults if f[2] == HONEST.ss58_address]
    conn = three.client.app.state.service.conn  # type: ignore[attr-defined]
    held = facts.round_outcome(conn, RUN, 0).held.get(HONEST.ss58_address)
    assert held != PENDING_AUDIT  # only its probation holds it now
    assert three.client.get(f"/v1/runs/{RUN}/reassigned").json() == []


@pytest.mark.parametrize(("actor", "standing"), [("deadline", "outvoted"), ("referee", "stands")])
def test_only_a_referees_or_quorums_upheld_dispute_outweighs_the_judges(
    three: Service, actor: Actor, standing: str
) -> None:
    """Proves a dispute the island lost at a deadline (no referee to rule) leaves the
    judges' majority to decide, while a referee's upholding keeps the fault standing."""
    lie = round_0_with_a_lie(three, RELAY, WITHHELD, serve=False)
    _match_all(three, (OTHER_AUDITOR, THIRD_AUDITOR), HONEST.ss58_address)
    conn = three.client.app.state.service.conn  # type: ignore[attr-defined]
    game = open_recompute(
        dispute_id="d" * 64, run_id=RUN, round=0, segment=0, island=HONEST.ss58_address,
        auditor=LIAR.ss58_address, check="unverifiable", rules=Rules(), now=0,
    )  # fmt: skip
    game_storage.insert_game(conn, decide(game, "upheld", "lost", 1, actor), lie, 0, 0)
    got = [v.standing for v in facts.standing_verdicts(conn, RUN, 0) if v.verdict_id == lie]
    assert got == [standing]
