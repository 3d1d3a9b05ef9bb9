"""Admin routes (admin token): create runs, open rounds, refresh the metagraph."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from hypertrain.api.models import MetagraphStatus
from hypertrain.challenge.deps import ERRORS, State, require_admin, serialized
from hypertrain.challenge.rounds import lifecycle
from hypertrain.protocol.envelope import Envelope

router = APIRouter(prefix="/admin/v1", tags=["admin"], dependencies=[Depends(require_admin)])
RunId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]


class CreateRunIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    manifest: dict[str, JsonValue]  # a manifest document, validated by the service


class OpenRoundIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    start_model_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    start_model_url: str | None = Field(default=None, max_length=1024)


@router.post("/runs", responses=ERRORS, response_model=Envelope)
@serialized
def create_run(state: State, payload: CreateRunIn) -> Envelope:
    """Store a run; the service signs its manifest with the coordinator key."""
    return lifecycle.create_run(state, payload.manifest)


@router.post("/runs/{run_id}/rounds", responses=ERRORS, response_model=Envelope)
@serialized
def open_round(state: State, run_id: RunId, payload: OpenRoundIn) -> Envelope:
    """Open the next round at the current beacon round (start model defaults to the merge)."""
    return lifecycle.open_round(state, run_id, payload.start_model_sha256, payload.start_model_url)


@router.post("/metagraph/refresh", responses=ERRORS, response_model=MetagraphStatus)
async def refresh_metagraph(state: State) -> MetagraphStatus:
    await state.metagraph.refresh()
    return state.metagraph.status()
