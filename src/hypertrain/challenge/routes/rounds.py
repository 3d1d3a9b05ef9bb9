"""Rounds routes: create a run and open its rounds (admin), commit (miner), verdicts,
merge tapes and corrections (worker), and the run's public record."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from hypertrain.api.models import (
    CommitAnswer,
    CorrectionAnswer,
    LossPoint,
    MergeAnswer,
    ProvenFault,
    RosterEntry,
    RoundDetail,
    RoundSummary,
    RunListItem,
    RunSummary,
    VerdictAnswer,
)
from hypertrain.challenge.deps import (
    ERRORS,
    RoundIndex,
    RunId,
    State,
    require_admin,
    require_worker,
    serialized,
)
from hypertrain.challenge.lifecycle import intake
from hypertrain.challenge.rounds import phases, tapes, views
from hypertrain.challenge.settlement import rollbacks
from hypertrain.protocol.envelope import Envelope

public = APIRouter(prefix="/v1", tags=["rounds"])
worker = APIRouter(prefix="/worker/v1", dependencies=[Depends(require_worker)], tags=["rounds"])
admin = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)], tags=["rounds"])


class CreateRunIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    manifest: dict[str, JsonValue]  # a manifest document, validated by the service


class OpenRoundIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    start_model_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    start_model_url: str | None = Field(default=None, max_length=1024)


@public.get("/runs", response_model=list[RunListItem])
@serialized
def runs(state: State) -> list[RunListItem]:
    return views.list_runs(state.conn)


@public.get("/runs/{run_id}", response_model=RunSummary)
@serialized
def run_summary(state: State, run_id: RunId) -> RunSummary:
    return views.run_summary(state, run_id)


@public.get("/runs/{run_id}/manifest", response_model=Envelope)
@serialized
def manifest(state: State, run_id: RunId) -> Envelope:
    """The coordinator-signed manifest envelope (verify it before training)."""
    return views.manifest_envelope(state.conn, run_id)


@public.get("/runs/{run_id}/rounds", response_model=list[RoundSummary])
@serialized
def rounds(state: State, run_id: RunId) -> list[RoundSummary]:
    return views.round_summaries(state, run_id)


@public.get("/runs/{run_id}/rounds/{round_index}", response_model=RoundDetail)
@serialized
def round_detail(state: State, run_id: RunId, round_index: RoundIndex) -> RoundDetail:
    """One round: signed open record, commits, assignments, verdicts, merge tape."""
    return views.round_detail(state, run_id, round_index)


@public.get("/runs/{run_id}/faults", response_model=list[ProvenFault])
@serialized
def faults(state: State, run_id: RunId) -> list[ProvenFault]:
    """Every proven fault of the run, and whether a rollback of its merged update is due."""
    state.manifest(run_id)
    return rollbacks.proven_faults(state.conn, run_id)


@public.get("/runs/{run_id}/roster", response_model=list[RosterEntry])
@serialized
def roster(state: State, run_id: RunId) -> list[RosterEntry]:
    return views.roster(state, run_id)


@public.get("/runs/{run_id}/loss", response_model=list[LossPoint])
@serialized
def loss(state: State, run_id: RunId) -> list[LossPoint]:
    return views.loss_curve(views.round_summaries(state, run_id))


@public.post("/commit", responses=ERRORS, response_model=CommitAnswer)
@serialized
def commit(state: State, envelope: Envelope) -> CommitAnswer:
    """A ``commit`` envelope for the round in its train phase."""
    return intake.commit(state, envelope)


@worker.get(
    "/runs/{run_id}/rounds/{round_index}/assignments",
    responses=ERRORS,
    response_model=list[Envelope],
)
@serialized
def assignments(state: State, run_id: RunId, round_index: RoundIndex) -> list[Envelope]:
    """Coordinator-signed ``audit-assignment`` envelopes of a round."""
    views.round_detail(state, run_id, round_index)
    return views.assignments(state.conn, run_id, round_index)


@worker.post("/verdict", responses=ERRORS, response_model=VerdictAnswer)
@serialized
def verdict(state: State, envelope: Envelope) -> VerdictAnswer:
    """An auditor's signed ``verdict`` during the audit window."""
    return intake.verdict(state, envelope)


@worker.post("/merge", responses=ERRORS, response_model=MergeAnswer)
@serialized
def merge(state: State, envelope: Envelope) -> MergeAnswer:
    """The aggregator's signed ``merge-tape``; accepting it settles the round."""
    return intake.merge(state, envelope)


@worker.post("/merge-correction", responses=ERRORS, response_model=CorrectionAnswer)
@serialized
def merge_correction(state: State, envelope: Envelope) -> CorrectionAnswer:
    """A signed ``merge-correction``: a rollback's corrected tape for one merged round."""
    return tapes.accept_correction(state, envelope)


@admin.post("/runs", responses=ERRORS, response_model=Envelope)
@serialized
def create_run(state: State, payload: CreateRunIn) -> Envelope:
    """Store a run; the service signs its manifest with the coordinator key."""
    return phases.create_run(state, payload.manifest)


@admin.post("/runs/{run_id}/rounds", responses=ERRORS, response_model=Envelope)
@serialized
def open_round(state: State, run_id: RunId, payload: OpenRoundIn) -> Envelope:
    """Open the next round at the current beacon round (start model defaults to the merge)."""
    return phases.open_round(state, run_id, payload.start_model_sha256, payload.start_model_url)


router = APIRouter()
for part in (public, worker, admin):
    router.include_router(part)
