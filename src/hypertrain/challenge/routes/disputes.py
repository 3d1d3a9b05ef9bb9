"""Dispute routes: open a game, answer its queries, upload inputs, rule, read it.

Envelopes authenticate parties and referees; the game decides who may say what.
Operation inputs are raw bytes anyone may upload: the service checks them against
the input hashes both parties signed.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from hypertrain.api.disputes import (
    DisputeAnswered,
    DisputeOpened,
    DisputeRuled,
    ReassignedAudit,
)
from hypertrain.challenge.deps import ERRORS, State, serialized
from hypertrain.challenge.disputes import games
from hypertrain.challenge.settlement.reassigned import waiting
from hypertrain.dispute.view import DisputeView
from hypertrain.protocol.envelope import Envelope

router = APIRouter(prefix="/v1", tags=["disputes"])


@router.post("/disputes", responses=ERRORS, response_model=DisputeOpened)
@serialized
def open_dispute(state: State, envelope: Envelope) -> DisputeView:
    """A ``dispute-open`` envelope from the judged island, within the verdict's own window."""
    return games.open_dispute(state, envelope)


@router.get("/disputes", responses=ERRORS)
@serialized
def list_disputes(
    state: State, run_id: str, round: int | None = None, stage: str | None = None
) -> list[DisputeView]:
    """Every dispute of a run (optionally of one round, or at one stage)."""
    state.manifest(run_id)
    return games.listing(state.conn, run_id, round, stage)


@router.get("/disputes/{dispute_id}", responses=ERRORS)
@serialized
def get_dispute(state: State, dispute_id: str) -> DisputeView:
    return games.view(state.conn, dispute_id)


@router.post("/disputes/{dispute_id}/answer", responses=ERRORS, response_model=DisputeAnswered)
@serialized
def answer(state: State, dispute_id: str, envelope: Envelope) -> DisputeView:
    """A ``dispute-answer`` envelope from a party, for the open query."""
    return games.answer(state, dispute_id, envelope)


@router.put("/disputes/{dispute_id}/inputs", responses=ERRORS)
async def put_inputs(state: State, dispute_id: str, request: Request) -> DisputeView:
    """The contested operation's input tensors (``application/octet-stream``)."""
    data = await request.body()
    return await state.offload(games.put_inputs, state.conn, state.due_round, dispute_id, data)


@router.get("/disputes/{dispute_id}/inputs", responses=ERRORS)
@serialized
def get_inputs(state: State, dispute_id: str) -> Response:
    data = games.get_inputs(state.conn, dispute_id)
    return Response(data, media_type="application/octet-stream")


@router.post("/disputes/{dispute_id}/ruling", responses=ERRORS, response_model=DisputeRuled)
@serialized
def ruling(state: State, dispute_id: str, envelope: Envelope) -> DisputeView:
    """A ``dispute-ruling`` envelope from a referee named in the manifest."""
    return games.ruling(state, dispute_id, envelope)


@router.get("/runs/{run_id}/reassigned", responses=ERRORS, response_model=list[ReassignedAudit])
@serialized
def reassigned(state: State, run_id: str) -> list[ReassignedAudit]:
    """Audits awaiting another auditor's verdict: set aside by a dispute, or missed."""
    state.manifest(run_id)
    return waiting(state.conn, state.settings, state.due_round, run_id)
