"""Disputes of a verdict in the scenario: opened, lost by silence, played to the referee or
against a lying auditor."""

from __future__ import annotations

from typing import Any

from hypertrain.dispute.messages import DisputeAnswer, commitment_of
from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario.cast import AUDITOR, ISLANDS, RUN
from tests.challenge.dispute_scenario.runs import Played
from tests.challenge.disputeplay import answer, open_body, play_to_referee
from tests.challenge.disputeplay import commitment as answer_commitment


def open_dispute(
    svc: Played, verdict_id: str, segment: int, island: Hotkey = ISLANDS[0]
) -> tuple[str, dict[str, Any]]:
    """``island`` disputes the verdict at ``segment``; the dispute's id and its game."""
    opened = svc.post("/v1/disputes", island, "dispute-open", open_body(verdict_id, segment))
    assert opened.status_code == 200, opened.text
    return opened.json()["dispute_id"], opened.json()["game"]


def lose_by_silence(svc: Played, verdict_id: str, segment: int, island: Hotkey = ISLANDS[0]) -> str:
    """``island`` disputes the verdict and commits its first answer; the auditor will not
    answer, so the game is overturned once its answer deadline (3 beacon rounds) passed.
    The dispute's id."""
    dispute_id, game = open_dispute(svc, verdict_id, segment, island)
    body = answer_commitment(game, "island")
    r = svc.post(f"/v1/disputes/{dispute_id}/answer", island, "dispute-answer", body)
    assert r.status_code == 200, r.text
    return dispute_id


def played_to_referee(svc: Played, dispute_id: str) -> dict[str, Any]:
    """Island 0 and :data:`AUDITOR` answer every query until the game waits for the referee."""
    return play_to_referee(svc.client, RUN, dispute_id, ISLANDS[0], AUDITOR)


def liar_answer(game: dict[str, Any]) -> dict[str, Any]:
    """A lying auditor's answer: its own hashes, then at the layer stage the honest
    island's (the true digest of every section of the step it lied about)."""
    if game["stage"] == "layer":
        truth = answer(game, "island", 1, game["island_end"])
        return {**truth, "salt": "d4" * 32}
    return answer(game, "auditor", 1, game["island_end"])


def play_against_a_liar(
    svc: Played, dispute_id: str, *, turns: int, wait: int = 0
) -> dict[str, Any] | None:
    """Island 0 answers every query truly and :data:`AUDITOR` with :func:`liar_answer`, each
    ``wait`` beacon rounds after the query, until the game leaves the narrowing stages (the
    game then) or ``turns`` queries were answered (``None``)."""
    for _ in range(turns):
        game: dict[str, Any] = svc.client.get(f"/v1/disputes/{dispute_id}").json()["game"]
        if game["stage"] not in ("step", "layer", "op") or game.get("outcome"):
            return game
        if wait:
            svc.tick(wait)
        revealing = len(game["commitments"]) == 2
        bodies = {
            "island": answer(game, "island", 1, game["island_end"]),
            "auditor": liar_answer(game),
        }
        for key, party in ((ISLANDS[0], "island"), (AUDITOR, "auditor")):
            if party in game["answers" if revealing else "commitments"]:
                continue
            body = bodies[party]
            if not revealing:
                body = commitment_of(DisputeAnswer.model_validate(body)).model_dump(mode="json")
            r = svc.post(f"/v1/disputes/{dispute_id}/answer", key, "dispute-answer", body)
            assert r.status_code == 200, r.text
    return None
