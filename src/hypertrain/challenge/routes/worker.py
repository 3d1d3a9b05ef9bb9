"""Auditor and aggregator routes: worker token plus a signed envelope."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from hypertrain.api.models import (
    CorrectionAnswer,
    JoinAnswer,
    MergeAnswer,
    PendingAdmission,
    VerdictAnswer,
)
from hypertrain.challenge.admission import challenge
from hypertrain.challenge.deps import ERRORS, State, require_worker, serialized
from hypertrain.challenge.rounds import intake, rollbacks, views
from hypertrain.protocol.envelope import Envelope

router = APIRouter(prefix="/worker/v1", tags=["worker"], dependencies=[Depends(require_worker)])
RunId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
RoundIndex = Annotated[int, Path(ge=0, le=2**53 - 1)]


@router.get(
    "/runs/{run_id}/rounds/{round_index}/assignments",
    responses=ERRORS,
    response_model=list[Envelope],
)
@serialized
def assignments(state: State, run_id: RunId, round_index: RoundIndex) -> list[Envelope]:
    """Coordinator-signed ``audit-assignment`` envelopes of a round."""
    views.round_detail(state, run_id, round_index)
    return views.assignments(state, run_id, round_index)


@router.post("/verdict", responses=ERRORS, response_model=VerdictAnswer)
@serialized
def verdict(state: State, envelope: Envelope) -> VerdictAnswer:
    """An auditor's signed ``verdict`` during the audit window."""
    return intake.verdict(state, envelope)


@router.post("/merge", responses=ERRORS, response_model=MergeAnswer)
@serialized
def merge(state: State, envelope: Envelope) -> MergeAnswer:
    """The aggregator's signed ``merge-tape``; accepting it settles the round."""
    return intake.merge(state, envelope)


@router.post("/merge-correction", responses=ERRORS, response_model=CorrectionAnswer)
@serialized
def merge_correction(state: State, envelope: Envelope) -> CorrectionAnswer:
    """A signed ``merge-correction``: a rollback's corrected tape for one merged round."""
    return rollbacks.accept_correction(state, envelope)


@router.get("/runs/{run_id}/admissions", responses=ERRORS, response_model=list[PendingAdmission])
@serialized
def admissions(state: State, run_id: RunId) -> list[PendingAdmission]:
    """Answered admission challenges awaiting a worker's reference hash."""
    return challenge.pending(state, run_id)


@router.post("/admission/check", responses=ERRORS, response_model=JoinAnswer)
@serialized
def admission_check(state: State, envelope: Envelope) -> JoinAnswer:
    """A worker's signed ``admission-check``: admits the island on a match."""
    return intake.admission_check(state, envelope)
