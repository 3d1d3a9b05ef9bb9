"""The public record of a dispute game: what the challenge service stores and answers.

The service's ``GET /v1/disputes/{id}`` answers it (built from its tables by
``hypertrain.challenge.store.game_storage.load_view``), and the clients and parties
read it (:mod:`hypertrain.api.disputes`, :mod:`hypertrain.evidence.respond`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from hypertrain.dispute.model import Game


class DisputeView(BaseModel):
    """What ``GET /v1/disputes/{id}`` answers: the stored record and the game's state."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dispute_id: str
    run_id: str
    round: int
    verdict_id: str
    hotkey: str
    auditor: str
    bond: int
    opened_beacon_round: int
    decided_beacon_round: int | None
    bytes_in: int
    game: Game
