"""Read-only public JSON: runs, manifests, rounds, roster, loss curve (the dashboard's data)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from hypertrain.api.models import (
    BeaconPublic,
    LossPoint,
    ProvenFault,
    RosterEntry,
    RoundDetail,
    RoundSummary,
    RunListItem,
    RunSummary,
    WeightsPublic,
)
from hypertrain.challenge.deps import State, serialized
from hypertrain.challenge.platform.weights import latest_weights_body
from hypertrain.challenge.rounds import rollbacks, views
from hypertrain.protocol.envelope import Envelope

router = APIRouter(prefix="/v1", tags=["public"])
RunId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
RoundIndex = Annotated[int, Path(ge=0, le=2**53 - 1)]


@router.get("/beacon", response_model=BeaconPublic)
async def beacon(state: State) -> BeaconPublic:
    """The latest verified beacon round the service acts on."""
    cur = state.current
    return BeaconPublic(
        round=cur.round if cur else None, randomness=cur.randomness if cur else None
    )


@router.get("/weights/latest", responses={200: {"model": WeightsPublic}, 404: {}})
async def latest_weights(state: State) -> Response:
    """The newest epoch's ``get_weights`` answer, as stored (miners read their weight here)."""
    return Response(latest_weights_body(state), media_type="application/json")


@router.get("/runs", response_model=list[RunListItem])
@serialized
def runs(state: State) -> list[RunListItem]:
    return views.list_runs(state)


@router.get("/runs/{run_id}", response_model=RunSummary)
@serialized
def run_summary(state: State, run_id: RunId) -> RunSummary:
    return views.run_summary(state, run_id)


@router.get("/runs/{run_id}/manifest", response_model=Envelope)
@serialized
def manifest(state: State, run_id: RunId) -> Envelope:
    """The coordinator-signed manifest envelope (verify it before training)."""
    return views.manifest_envelope(state, run_id)


@router.get("/runs/{run_id}/rounds", response_model=list[RoundSummary])
@serialized
def rounds(state: State, run_id: RunId) -> list[RoundSummary]:
    return views.round_summaries(state, run_id)


@router.get("/runs/{run_id}/rounds/{round_index}", response_model=RoundDetail)
@serialized
def round_detail(state: State, run_id: RunId, round_index: RoundIndex) -> RoundDetail:
    """One round: signed open record, commits, assignments, verdicts, merge tape."""
    return views.round_detail(state, run_id, round_index)


@router.get("/runs/{run_id}/faults", response_model=list[ProvenFault])
@serialized
def faults(state: State, run_id: RunId) -> list[ProvenFault]:
    """Every proven fault of the run, and whether a rollback of its merged update is due."""
    return rollbacks.proven_faults(state, run_id)


@router.get("/runs/{run_id}/roster", response_model=list[RosterEntry])
@serialized
def roster(state: State, run_id: RunId) -> list[RosterEntry]:
    return views.roster(state, run_id)


@router.get("/runs/{run_id}/loss", response_model=list[LossPoint])
@serialized
def loss(state: State, run_id: RunId) -> list[LossPoint]:
    return views.loss_curve(state, run_id)
