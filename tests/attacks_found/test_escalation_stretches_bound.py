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

from tests.challenge.dispute_scenario import (
    BOUND,
    ISLANDS,
    Service,
    play_against_a_liar,
    service,
    to_verdict,
)
from tests.challenge.disputeplay import open_body

__all__ = ["service"]  # answer_rounds 3, referee_rounds 3, clock_rounds 60
LAST_MOMENT = 2  # beacon rounds waited before each message (its deadline is 3 after)


def test_an_escalated_game_is_decided_within_the_documented_bound(service: Service) -> None:
    """Proves a game escalated to a re-audit at its last moment is still decided within
    ``2 x clock_rounds + referee_rounds x (1 + referee_extensions)`` of its opening."""
    verdict_id, segment = to_verdict(service)
    opened = service.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", open_body(verdict_id, segment)
    )
    assert opened.status_code == 200, opened.text
    dispute_id = opened.json()["dispute_id"]
    opened_at = service.client.get(f"/v1/disputes/{dispute_id}").json()["opened_beacon_round"]
    game = play_against_a_liar(service, dispute_id, turns=60, wait=LAST_MOMENT)
    assert game is not None, "the game never left the narrowing stages"
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
