"""Taking part in disputes automatically: one pass over the games where a key is a party.

Islands (``hypertrain-miner watch --follow``) and auditors (``hypertrain auditor run
--follow``) call :func:`take_part` for each undecided dispute naming their key: it
answers the open query from a :class:`~hypertrain.evidence.party.SegmentParty` and, once
an operation is contested, uploads its input tensors. Every answer is first committed
to (a salted hash) and revealed only once both parties committed. Parties are cached per dispute,
so the replay behind the answers runs once per game, not once per query.

A message the service refuses (an HTTP 4xx: the game was decided meanwhile, the answer
came late, it was already answered) is the event ``dispute_refused``, with the
service's status, code and reason, and the pass goes on: the game's next state, read at
the next pass, says what is due, so a peer's refusal never ends the party's loop. A
service that cannot be reached (no answer, or a 5xx) is raised for the loop to wait out.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import Any

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.dispute.game import Game
from hypertrain.dispute.messages import DisputeAnswer, commitment_of
from hypertrain.dispute.view import DisputeView
from hypertrain.evidence.party import SegmentParty
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.rolekit import Emit

log = logging.getLogger(__name__)
PartyFor = Callable[[Game], SegmentParty]


def take_part(
    service: ChallengeClient,
    key: Hotkey,
    view: DisputeView,
    parties: dict[str, SegmentParty],
    party_for: PartyFor,
    *,
    expiry_margin: int = 50,
    emit: Emit | None = None,
) -> bool:
    """Send our due message in one dispute, if any; True when something was sent.

    Each query takes two messages: the commitment to a freshly salted answer, then,
    once both parties committed, that answer itself. The salted answer is kept in
    the party until it is revealed.
    """
    game = view.game
    if game.stage == "decided":
        parties.pop(game.dispute_id, None)
        return False
    role = game.role_of(key.ss58_address)
    if game.stage == "referee" and game.inputs_sha256 is not None:
        return False
    if game.stage != "referee" and not game.due(role):
        return False  # answered already, or a ``recompute`` game: no message of ours
    party = parties.get(game.dispute_id)
    if party is None:
        party = parties[game.dispute_id] = party_for(game)
    if game.stage == "referee":
        inputs = party.op_inputs(game)
        if not _sent(emit, game, role, lambda: service.put_dispute_inputs(game.dispute_id, inputs)):
            return False
        _emit(emit, "dispute_inputs", game, role)
        return True
    body = _due_message(game, party)
    if body is None:
        _emit(emit, "dispute_reveal_lost", game, role)
        return False
    env = seal(
        key,
        domain="dispute-answer",
        run_id=game.run_id,
        body=body.model_dump(mode="json"),
        expiry_round=service.beacon_round() + expiry_margin,
    )
    if not _sent(emit, game, role, lambda: service.dispute_answer(game.dispute_id, env)):
        return False
    _emit(emit, "dispute_commit" if body.is_commitment else "dispute_answer", game, role)
    return True


def _sent(emit: Emit | None, game: Game, role: str, send: Callable[[], object]) -> bool:
    """Send one message; the service's refusal of it (a 4xx) is the event
    ``dispute_refused`` and False, any other failure is raised."""
    try:
        send()
    except ServiceError as exc:
        if not 400 <= exc.status < 500:
            raise
        fields = {"status": exc.status, "code": exc.code, "reason": str(exc)[:500]}
        _emit(emit, "dispute_refused", game, role, **fields)
        return False
    return True


def _due_message(game: Game, party: SegmentParty) -> DisputeAnswer | None:
    """The commitment to a new salted answer, or the reveal of the committed one."""
    if not game.revealing:
        reveal = party.answer(game).model_copy(update={"salt": secrets.token_hex(32)})
        party.reveals[game.query] = reveal
        return commitment_of(reveal)
    return party.reveals.get(game.query)  # None: the salt was lost (a restart)


def _emit(emit: Emit | None, event: str, game: Game, role: str, **extra: Any) -> None:
    fields: dict[str, Any] = {"dispute_id": game.dispute_id[:16], "role": role, **extra}
    fields |= {"stage": game.stage}
    fields |= {"query": game.query, "step": game.step, "section": game.section}
    if emit is not None:
        emit(event, **fields)
    log.info("%s %s", event, fields)
