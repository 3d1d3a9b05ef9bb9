"""Taking part in disputes automatically: one pass over the games where a key is a party.

Islands (``hypertrain-miner watch --follow``) and auditors (``hypertrain auditor run
--follow``) call :func:`take_part` for each undecided dispute naming their key: it
answers the open query from a :class:`~hypertrain.evidence.party.SegmentParty` and, once
an operation is contested, uploads its input tensors. Parties are cached per dispute,
so the replay behind the answers runs once per game, not once per query.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from hypertrain.challenge.client import ChallengeClient
from hypertrain.dispute.game import Game
from hypertrain.evidence.party import SegmentParty
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey

log = logging.getLogger(__name__)
PartyFor = Callable[[Game], SegmentParty]
Emit = Callable[..., None]


def take_part(
    service: ChallengeClient,
    key: Hotkey,
    view: dict[str, Any],
    parties: dict[str, SegmentParty],
    party_for: PartyFor,
    *,
    expiry_margin: int = 50,
    emit: Emit | None = None,
) -> bool:
    """Answer one dispute's open query if it is ours to answer; True when something was sent."""
    game = Game.model_validate(view["game"])
    if game.stage == "decided":
        parties.pop(game.dispute_id, None)
        return False
    role = game.role_of(key.ss58_address)
    if game.stage == "referee" and game.inputs_sha256 is not None:
        return False
    if game.stage != "referee" and role in game.answers:
        return False
    party = parties.get(game.dispute_id)
    if party is None:
        party = parties[game.dispute_id] = party_for(game)
    if game.stage == "referee":
        service.put_dispute_inputs(game.dispute_id, party.op_inputs(game))
        _emit(emit, "dispute_inputs", game, role)
        return True
    body = party.answer(game)
    env = seal(
        key,
        domain="dispute-answer",
        run_id=game.run_id,
        body=body.model_dump(mode="json"),
        expiry_round=service.beacon_round() + expiry_margin,
    )
    service.dispute_answer(game.dispute_id, env)
    _emit(emit, "dispute_answer", game, role)
    return True


def _emit(emit: Emit | None, event: str, game: Game, role: str) -> None:
    fields: dict[str, Any] = {"dispute_id": game.dispute_id[:16], "role": role}
    fields |= {"stage": game.stage}
    fields |= {"query": game.query, "step": game.step, "section": game.section}
    if emit is not None:
        emit(event, **fields)
    log.info("%s %s", event, fields)
