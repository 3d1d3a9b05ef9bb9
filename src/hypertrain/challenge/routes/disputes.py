"""Dispute routes: open a game, answer its queries, upload inputs, rule, read it; honeypots.

Envelopes authenticate parties and referees; the game decides who may say what.
Operation inputs are raw bytes anyone may upload: the service checks them against
the input hashes both parties signed.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from hypertrain.api.disputes import (
    DisputeAnswered,
    DisputeOpened,
    DisputeRuled,
    HoneypotAnswer,
    HoneypotPeriodPublic,
    HoneypotRevealAck,
    ReassignedAudit,
)
from hypertrain.challenge import honeypots
from hypertrain.challenge.deps import ERRORS, State, require_admin, serialized
from hypertrain.challenge.disputes import games
from hypertrain.challenge.settlement.reassigned import waiting
from hypertrain.dispute.view import DisputeView
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.honeypots import HoneypotList, HoneypotPeriod

public = APIRouter(prefix="/v1", tags=["disputes"])
admin = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)], tags=["disputes"])


@public.post("/disputes", responses=ERRORS, response_model=DisputeOpened)
@serialized
def open_dispute(state: State, envelope: Envelope) -> DisputeView:
    """A ``dispute-open`` envelope from the judged island, within the verdict's own window."""
    return games.open_dispute(state, envelope)


@public.get("/disputes", responses=ERRORS)
@serialized
def list_disputes(
    state: State, run_id: str, round: int | None = None, stage: str | None = None
) -> list[DisputeView]:
    """Every dispute of a run (optionally of one round, or at one stage)."""
    return games.listing(state, run_id, round, stage)


@public.get("/disputes/{dispute_id}", responses=ERRORS)
@serialized
def get_dispute(state: State, dispute_id: str) -> DisputeView:
    return games.view(state, dispute_id)


@public.post("/disputes/{dispute_id}/answer", responses=ERRORS, response_model=DisputeAnswered)
@serialized
def answer(state: State, dispute_id: str, envelope: Envelope) -> DisputeView:
    """A ``dispute-answer`` envelope from a party, for the open query."""
    return games.answer(state, dispute_id, envelope)


@public.put("/disputes/{dispute_id}/inputs", responses=ERRORS)
async def put_inputs(state: State, dispute_id: str, request: Request) -> DisputeView:
    """The contested operation's input tensors (``application/octet-stream``)."""
    data = await request.body()
    return await state.offload(games.put_inputs, state, dispute_id, data)


@public.get("/disputes/{dispute_id}/inputs", responses=ERRORS)
@serialized
def get_inputs(state: State, dispute_id: str) -> Response:
    return Response(games.get_inputs(state, dispute_id), media_type="application/octet-stream")


@public.post("/disputes/{dispute_id}/ruling", responses=ERRORS, response_model=DisputeRuled)
@serialized
def ruling(state: State, dispute_id: str, envelope: Envelope) -> DisputeView:
    """A ``dispute-ruling`` envelope from a referee named in the manifest."""
    return games.ruling(state, dispute_id, envelope)


@public.get("/runs/{run_id}/reassigned", responses=ERRORS, response_model=list[ReassignedAudit])
@serialized
def reassigned(state: State, run_id: str) -> list[ReassignedAudit]:
    """Audits awaiting another auditor's verdict: set aside by a dispute, or missed."""
    return waiting(state, run_id)


@public.get("/runs/{run_id}/honeypots", responses=ERRORS, response_model=HoneypotAnswer)
@serialized
def honeypot_table(state: State, run_id: str) -> HoneypotAnswer:
    """Every committed honeypot period (revealed lists included) and the per-strategy table
    accumulated over the revealed ones."""
    rows = honeypots.table(state, run_id)  # not_revealed (404) until the first reveal
    return HoneypotAnswer(periods=honeypots.periods(state, run_id), table=rows)


@public.get(
    "/runs/{run_id}/honeypots/periods",
    responses=ERRORS,
    response_model=list[HoneypotPeriodPublic],
)
@serialized
def honeypot_periods(state: State, run_id: str) -> list[HoneypotPeriodPublic]:
    """The committed periods: rounds, commitment, when committed; lists once revealed."""
    return honeypots.periods(state, run_id)


@admin.post("/runs/{run_id}/honeypots", responses=ERRORS, response_model=HoneypotRevealAck)
@serialized
def reveal_honeypots(state: State, run_id: str, payload: HoneypotList) -> HoneypotRevealAck:
    """Publish a period's list (its last round final); it must hash to that period's
    commitment, the period found by the commitment it matches."""
    return honeypots.reveal(state, run_id, payload)


@admin.post(
    "/runs/{run_id}/honeypots/periods/{period}/reveal",
    responses=ERRORS,
    response_model=HoneypotRevealAck,
)
@serialized
def reveal_period(
    state: State, run_id: str, period: int, payload: HoneypotList
) -> HoneypotRevealAck:
    """Publish the list of one named period; it must hash to that period's commitment."""
    return honeypots.reveal(state, run_id, payload, period)


@admin.post(
    "/runs/{run_id}/honeypots/periods", responses=ERRORS, response_model=HoneypotPeriodPublic
)
@serialized
def commit_period(state: State, run_id: str, payload: HoneypotPeriod) -> HoneypotPeriodPublic:
    """Commit the next period's list (rounds, SHA-256 of the list) before its first round."""
    return honeypots.commit_period(state, run_id, payload)


router = APIRouter()
for part in (public, admin):
    router.include_router(part)
