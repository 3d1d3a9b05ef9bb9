"""Tape-witness routes: a registered key's signed ``tape-attestation``, the round's witnesses."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from hypertrain.api.models import AttestationAnswer, TapeWitnessView
from hypertrain.challenge.deps import ERRORS, State, serialized
from hypertrain.challenge.errors import NotFoundError
from hypertrain.challenge.rounds import tapes
from hypertrain.challenge.settlement import witness
from hypertrain.protocol.envelope import Envelope

router = APIRouter(prefix="/v1", tags=["witness"])
RunId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
RoundIndex = Annotated[int, Path(ge=0, le=2**53 - 1)]


@router.post("/tape-attestation", responses=ERRORS, response_model=AttestationAnswer)
@serialized
def attest(state: State, envelope: Envelope) -> AttestationAnswer:
    """A witness's signed ``tape-attestation``: its recomputation of the round's tape."""
    return tapes.attest(state, envelope)


@router.get(
    "/runs/{run_id}/rounds/{round_index}/witnesses",
    responses=ERRORS,
    response_model=TapeWitnessView,
)
@serialized
def witnesses(state: State, run_id: RunId, round_index: RoundIndex) -> TapeWitnessView:
    """The witnesses' word on the round's current tape (404 while it has none)."""
    state.manifest(run_id)
    found = witness.view(state.conn, state.settings, state.due_round, run_id, round_index)
    if found is None:
        raise NotFoundError(f"round {round_index} of {run_id} has no merge tape", code="no_tape")
    return found
