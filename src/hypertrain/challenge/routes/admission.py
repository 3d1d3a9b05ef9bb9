"""Admission routes: join, leave and the admission challenge (miner), and the workers'
checks of the challenge's answers."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from hypertrain.api.models import (
    AdmissionAnswerAck,
    AdmissionStatus,
    JoinAnswer,
    LeaveAnswer,
    PendingAdmission,
)
from hypertrain.challenge.admission import challenge, leave
from hypertrain.challenge.deps import ERRORS, RunId, State, require_worker, serialized
from hypertrain.challenge.lifecycle import intake
from hypertrain.protocol.envelope import Envelope

public = APIRouter(prefix="/v1", tags=["admission"])
worker = APIRouter(prefix="/worker/v1", dependencies=[Depends(require_worker)], tags=["admission"])


@public.post("/join", responses=ERRORS, response_model=JoinAnswer)
@serialized
def join(state: State, envelope: Envelope) -> JoinAnswer:
    """Admission: a ``join`` envelope carrying the hardware report and layout."""
    return intake.join(state, envelope)


@public.post("/leave", responses=ERRORS, response_model=LeaveAnswer)
@serialized
def leave_run(state: State, envelope: Envelope) -> LeaveAnswer:
    """A ``leave`` envelope: the island trains no round opened after it (final for the run)."""
    return leave.leave(state, envelope)


@public.get("/runs/{run_id}/admission/{hotkey}", responses=ERRORS, response_model=AdmissionStatus)
@serialized
def admission_status(
    state: State,
    run_id: RunId,
    hotkey: Annotated[str, Path(pattern=r"^[1-9A-HJ-NP-Za-km-z]{40,60}$")],
) -> AdmissionStatus:
    """An island's admission challenge: status, deadline, and the seed once it is public."""
    return challenge.status(state, run_id, hotkey)


@public.post("/admission/answer", responses=ERRORS, response_model=AdmissionAnswerAck)
@serialized
def admission_answer(state: State, envelope: Envelope) -> AdmissionAnswerAck:
    """An ``admission-answer`` envelope: one workload hash per device, before the deadline."""
    return intake.admission_answer(state, envelope)


@worker.get("/runs/{run_id}/admissions", responses=ERRORS, response_model=list[PendingAdmission])
@serialized
def admissions(state: State, run_id: RunId) -> list[PendingAdmission]:
    """Answered admission challenges awaiting a worker's reference hash."""
    manifest = state.manifest(run_id)
    return challenge.pending(state.conn, manifest, state.beacon, state.current, run_id)


@worker.post("/admission/check", responses=ERRORS, response_model=JoinAnswer)
@serialized
def admission_check(state: State, envelope: Envelope) -> JoinAnswer:
    """A worker's signed ``admission-check``: admits the island on a match."""
    return intake.admission_check(state, envelope)


router = APIRouter()
for part in (public, worker):
    router.include_router(part)
