"""A party's message the service refuses is an event, never an error of the pass: the
island answers a game that was decided while it replayed (HTTP 409 ``decided``)."""

from __future__ import annotations

from typing import Any, cast

from hypertrain.api.client import ChallengeClient
from hypertrain.dispute.game import Game
from hypertrain.dispute.messages import DisputeAnswer
from hypertrain.evidence.party import SegmentParty
from hypertrain.evidence.respond import take_part
from tests.challenge.dispute_scenario import ISLANDS, Service, service, to_verdict
from tests.challenge.disputeplay import answer, open_body

__all__ = ["service"]  # the dispute service fixture


class MadeUpParty:
    """A stand-in for the island's replay: the made-up hashes of ``disputeplay``."""

    def __init__(self) -> None:
        self.reveals: dict[int, DisputeAnswer] = {}

    def answer(self, game: Game) -> DisputeAnswer:
        doc = game.model_dump(mode="json")
        return DisputeAnswer.model_validate(answer(doc, "island", 1, game.island_end))


def test_an_answer_to_a_decided_game_is_an_event(service: Service) -> None:
    verdict_id, segment = to_verdict(service)
    opened = service.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", open_body(verdict_id, segment)
    )
    dispute_id = opened.json()["dispute_id"]
    client = ChallengeClient("http://testserver", http=service.client)
    stale = client.get_dispute(dispute_id)  # what the island read before its replay
    assert stale.game.stage != "decided"
    service.tick(40)  # past every deadline while the island replayed: the game is decided
    assert client.get_dispute(dispute_id).game.stage == "decided"
    events: list[tuple[str, dict[str, Any]]] = []
    parties: dict[str, SegmentParty] = {}

    def party_for(game: Game) -> SegmentParty:
        return cast(SegmentParty, MadeUpParty())

    sent = take_part(
        client, ISLANDS[0], stale, parties, party_for,
        emit=lambda name, **fields: events.append((name, fields)),
    )  # fmt: skip
    assert sent is False
    [(name, fields)] = events
    assert (name, fields["status"], fields["code"]) == ("dispute_refused", 409, "decided")
    assert fields["dispute_id"] == dispute_id[:16] and fields["role"] == "island"
    # the next pass reads the decided game and lets the party go
    assert (
        take_part(client, ISLANDS[0], client.get_dispute(dispute_id), parties, party_for) is False
    )
    assert parties == {}
