"""A game escalated to a ``recompute`` game at its last moment holds settlement past the bound.

docs/mechanism.md (Disputes): "Answering every message at the last moment therefore cannot
stretch a game past ``2 x clock_rounds + referee_rounds x (1 + referee_extensions)``";
an escalated game is "re-audited by the run's other auditors within the game's bound";
"Settlement waits ... one dispute can hold one round's settlement for at most the bound
above" (the bond is sized on that bound).

The parties choose when the traces stop telling them apart: both answer every message at
the last beacon round of its deadline, then at the layer stage every section agrees, which
escalates the game to a ``recompute`` game. Played on the real service (no listed auditor
re-audits, so it is upheld at its deadline), the test measures the beacon rounds between
the opening and the decision and compares them with the documented bound.
"""

from __future__ import annotations

from typing import Any

from hypertrain.dispute.messages import DisputeAnswer, commitment_of
from tests.attacks_found.test_liar_wins_by_agreeing import _liar_answer
from tests.challenge import test_disputes as _disputes
from tests.challenge.disputeplay import answer, open_body
from tests.challenge.helpers import signed
from tests.challenge.test_disputes import AUDITOR, ISLANDS, RUN, Service, _to_verdict
from tests.challenge.test_outsider_1 import BOUND

service = _disputes.service  # answer_rounds 3, referee_rounds 3, clock_rounds 60
LAST_MOMENT = 2  # beacon rounds waited before each message (its deadline is 3 after)


def _play_late(svc: Service, dispute_id: str) -> dict[str, Any]:
    """Both parties answer each message at its last moment, until the game leaves the
    narrowing stages."""
    for _ in range(60):
        game: dict[str, Any] = svc.client.get(f"/v1/disputes/{dispute_id}").json()["game"]
        if game["stage"] not in ("step", "layer", "op") or game.get("outcome"):
            return game
        svc.tick(LAST_MOMENT)
        revealing = len(game["commitments"]) == 2
        bodies = {
            "island": answer(game, "island", 1, game["island_end"]),
            "auditor": _liar_answer(game),
        }
        for key, party in ((ISLANDS[0], "island"), (AUDITOR, "auditor")):
            if party in game["answers" if revealing else "commitments"]:
                continue
            body = bodies[party]
            if not revealing:
                body = commitment_of(DisputeAnswer.model_validate(body)).model_dump(mode="json")
            r = svc.client.post(
                f"/v1/disputes/{dispute_id}/answer",
                json=signed(key, "dispute-answer", body, run_id=RUN),
            )
            assert r.status_code == 200, r.text
    raise AssertionError("the game never left the narrowing stages")


def test_an_escalated_game_is_decided_within_the_documented_bound(service: Service) -> None:
    """Proves a game escalated to a re-audit at its last moment is still decided within
    ``2 x clock_rounds + referee_rounds x (1 + referee_extensions)`` of its opening."""
    verdict_id, segment = _to_verdict(service)
    opened = service.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", open_body(verdict_id, segment)
    )
    assert opened.status_code == 200, opened.text
    dispute_id = opened.json()["dispute_id"]
    opened_at = service.client.get(f"/v1/disputes/{dispute_id}").json()["opened_beacon_round"]
    game = _play_late(service, dispute_id)
    escalated_at = service.beacon.round
    for _ in range(3 * BOUND):
        view = service.client.get(f"/v1/disputes/{dispute_id}").json()
        if view["game"].get("outcome"):
            break
        service.tick()
    decided = view["decided_beacon_round"]
    assert decided is not None, view
    assert decided - opened_at <= BOUND, (
        f"opened at {opened_at}, escalated ({game['stage']}) at {escalated_at}, decided at"
        f" {decided}: {decided - opened_at} beacon rounds against the bound {BOUND}"
    )
