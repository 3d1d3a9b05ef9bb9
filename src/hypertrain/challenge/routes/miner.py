"""Miner routes: signed envelopes from registered hotkeys (join, commit, dispute)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from hypertrain.api.models import (
    AdmissionAnswerAck,
    AdmissionStatus,
    CommitAnswer,
    JoinAnswer,
    LeaveAnswer,
)
from hypertrain.challenge.admission import challenge, leave
from hypertrain.challenge.deps import ERRORS, State, serialized
from hypertrain.challenge.rounds import intake
from hypertrain.protocol.envelope import Envelope

router = APIRouter(prefix="/v1", tags=["miner"])


@router.post("/join", responses=ERRORS, response_model=JoinAnswer)
@serialized
def join(state: State, envelope: Envelope) -> JoinAnswer:
    """Admission: a ``join`` envelope carrying the hardware report and layout."""
    return intake.join(state, envelope)


@router.post("/leave", responses=ERRORS, response_model=LeaveAnswer)
@serialized
def leave_run(state: State, envelope: Envelope) -> LeaveAnswer:
    """A ``leave`` envelope: the island trains no round opened after it (final for the run)."""
    return leave.leave(state, envelope)


@router.post("/commit", responses=ERRORS, response_model=CommitAnswer)
@serialized
def commit(state: State, envelope: Envelope) -> CommitAnswer:
    """A ``commit`` envelope for the round in its train phase."""
    return intake.commit(state, envelope)


@router.get("/runs/{run_id}/admission/{hotkey}", responses=ERRORS, response_model=AdmissionStatus)
@serialized
def admission_status(
    state: State,
    run_id: Annotated[str, Path(pattern=r"^[A-Za-z0-9_.-]{1,64}$")],
    hotkey: Annotated[str, Path(pattern=r"^[1-9A-HJ-NP-Za-km-z]{40,60}$")],
) -> AdmissionStatus:
    """An island's admission challenge: status, deadline, and the seed once it is public."""
    return challenge.status(state, run_id, hotkey)


@router.post("/admission/answer", responses=ERRORS, response_model=AdmissionAnswerAck)
@serialized
def admission_answer(state: State, envelope: Envelope) -> AdmissionAnswerAck:
    """An ``admission-answer`` envelope: one workload hash per device, before the deadline."""
    return intake.admission_answer(state, envelope)
