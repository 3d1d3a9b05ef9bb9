"""Competition-mode routes: admin creation, miner commit/reveal, evaluator tasks and scores."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, JsonValue

from hypertrain.challenge.competition import intake, views
from hypertrain.challenge.deps import ERRORS, State, require_admin, require_worker, serialized
from hypertrain.competition.messages import (
    CommitAccepted,
    CompetitionCreated,
    CycleRecord,
    CycleTask,
    Leaderboard,
    RevealAccepted,
    ScoreAccepted,
)
from hypertrain.protocol.envelope import Envelope

router = APIRouter(tags=["competition"])
CompetitionId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]


class CreateCompetitionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    spec: dict[str, JsonValue]  # a spec document, validated by the service
    pool: str  # base64 of the secret pool's samples, little-endian uint32 (see pool.py)


@router.post("/admin/v1/competitions", responses=ERRORS, dependencies=[Depends(require_admin)])
@serialized
def create_competition(state: State, payload: CreateCompetitionIn) -> CompetitionCreated:
    """Store a competition; the service signs its spec with the coordinator key."""
    return intake.create(state, payload.spec, payload.pool)


@router.get("/v1/competitions/{competition_id}", responses=ERRORS, response_model=Envelope)
@serialized
def competition_spec(state: State, competition_id: CompetitionId) -> Envelope:
    """The coordinator-signed ``competition`` envelope of the spec."""
    return intake.spec_envelope(state.conn, competition_id)


@router.get("/v1/competitions/{competition_id}/leaderboard", responses=ERRORS)
@serialized
def leaderboard(state: State, competition_id: CompetitionId) -> Leaderboard:
    return views.leaderboard(state.conn, state.due_round, competition_id)


@router.get("/v1/competitions/{competition_id}/cycles/{cycle}", responses=ERRORS)
@serialized
def cycle_record(
    state: State, competition_id: CompetitionId, cycle: Annotated[int, Path(ge=0, le=2**53 - 1)]
) -> CycleRecord:
    """A cycle's public record: revealed pages, models, signed scores and standings."""
    return views.cycle_record(state.conn, competition_id, cycle)


@router.post("/v1/compete/commit", responses=ERRORS)
@serialized
def commit(state: State, envelope: Envelope) -> CommitAccepted:
    """A ``compete-commit`` envelope: H(model hash, hotkey), ordered by its beacon round."""
    return intake.commit(state, envelope)


@router.post("/v1/compete/reveal", responses=ERRORS)
@serialized
def reveal(state: State, envelope: Envelope) -> RevealAccepted:
    """A ``compete-reveal`` envelope: the committed model's file list and relay."""
    return intake.reveal(state, envelope)


@router.get(
    "/worker/v1/competitions/{competition_id}/task",
    responses=ERRORS,
    dependencies=[Depends(require_worker)],
)
@serialized
def task(
    state: State,
    competition_id: CompetitionId,
    evaluator: Annotated[str | None, Query(max_length=64)] = None,
) -> CycleTask:
    """The open evaluation cycle: pages and models (those already scored are listed)."""
    return views.task(state.conn, competition_id, evaluator)


@router.post("/worker/v1/compete/score", responses=ERRORS, dependencies=[Depends(require_worker)])
@serialized
def score(state: State, envelope: Envelope) -> ScoreAccepted:
    """An evaluator's signed ``compete-score`` for one model of the open cycle."""
    return intake.score(state, envelope)
