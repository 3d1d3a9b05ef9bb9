"""Competition-mode routes: admin creation, miner commit/reveal, evaluator tasks and scores."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict

from hypertrain.challenge import compete_intake, compete_views
from hypertrain.challenge.deps import State, require_admin, require_worker, serialized
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
_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {}, 401: {}, 403: {}, 404: {}, 409: {}, 413: {}, 503: {},
}  # fmt: skip


class CreateCompetitionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    spec: dict[str, Any]
    pool: str  # base64 of the secret pool's samples, little-endian uint32 (see pool.py)


@router.post("/admin/v1/competitions", responses=_ERRORS, dependencies=[Depends(require_admin)])
@serialized
def create_competition(state: State, payload: CreateCompetitionIn) -> CompetitionCreated:
    """Store a competition; the service signs its spec with the coordinator key."""
    return compete_intake.create(state, payload.spec, payload.pool)


@router.get("/v1/competitions/{competition_id}", responses=_ERRORS, response_model=Envelope)
@serialized
def competition_spec(state: State, competition_id: CompetitionId) -> dict[str, Any]:
    """The coordinator-signed ``competition`` envelope of the spec."""
    compete_intake.spec_of(state, competition_id)
    row = state.conn.execute(
        "SELECT spec_envelope FROM competitions WHERE competition_id = ?", (competition_id,)
    ).fetchone()
    return Envelope.model_validate_json(row["spec_envelope"]).model_dump()


@router.get("/v1/competitions/{competition_id}/leaderboard", responses=_ERRORS)
@serialized
def leaderboard(state: State, competition_id: CompetitionId) -> Leaderboard:
    return compete_views.leaderboard(state, competition_id)


@router.get("/v1/competitions/{competition_id}/cycles/{cycle}", responses=_ERRORS)
@serialized
def cycle_record(
    state: State, competition_id: CompetitionId, cycle: Annotated[int, Path(ge=0, le=2**53 - 1)]
) -> CycleRecord:
    """A cycle's public record: revealed pages, models, signed scores and standings."""
    return compete_views.cycle_record(state, competition_id, cycle)


@router.post("/v1/compete/commit", responses=_ERRORS)
@serialized
def commit(state: State, envelope: Envelope) -> CommitAccepted:
    """A ``compete-commit`` envelope: H(model hash, hotkey), ordered by its beacon round."""
    return compete_intake.commit(state, envelope)


@router.post("/v1/compete/reveal", responses=_ERRORS)
@serialized
def reveal(state: State, envelope: Envelope) -> RevealAccepted:
    """A ``compete-reveal`` envelope: the committed model's file list and relay."""
    return compete_intake.reveal(state, envelope)


@router.get(
    "/worker/v1/competitions/{competition_id}/task",
    responses=_ERRORS,
    dependencies=[Depends(require_worker)],
)
@serialized
def task(
    state: State,
    competition_id: CompetitionId,
    evaluator: Annotated[str | None, Query(max_length=64)] = None,
) -> CycleTask:
    """The open evaluation cycle: pages and models (those already scored are listed)."""
    return compete_views.task(state, competition_id, evaluator)


@router.post("/worker/v1/compete/score", responses=_ERRORS, dependencies=[Depends(require_worker)])
@serialized
def score(state: State, envelope: Envelope) -> ScoreAccepted:
    """An evaluator's signed ``compete-score`` for one model of the open cycle."""
    return compete_intake.score(state, envelope)
