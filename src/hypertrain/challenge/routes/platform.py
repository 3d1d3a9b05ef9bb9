"""Platform routes: the Cortex contract (version 1: health, version, get_weights,
metrics), the beacon round the service acts on, the latest weights, and the metagraph
refresh (admin)."""

from __future__ import annotations

import contextlib
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from hypertrain import __version__
from hypertrain.api.models import (
    BeaconPublic,
    HealthAnswer,
    MetagraphStatus,
    VersionAnswer,
    WeightsPublic,
)
from hypertrain.challenge.deps import ERRORS, State, require_admin, require_internal
from hypertrain.challenge.platform import weights
from hypertrain.challenge.platform.weights import latest_weights_body

contract = APIRouter(tags=["platform"])
public = APIRouter(prefix="/v1", tags=["platform"])
admin = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)], tags=["platform"])


@contract.get(
    "/health",
    responses={503: {"description": "cannot score yet"}},
    response_model=HealthAnswer,
)
async def health(request: Request, response: Response) -> HealthAnswer:
    """Readiness: 200 when the service can score (a metagraph snapshot is held), else 503."""
    state = getattr(request.app.state, "service", None)
    if state is None:
        response.status_code = 503
        return HealthAnswer(ok=False, reason="starting")
    ok = state.metagraph.snapshot is not None
    response.status_code = 200 if ok else 503
    return HealthAnswer(
        ok=ok,
        metagraph=state.metagraph.status(),
        beacon_round=state.current.round if state.current else None,
        beacon=state.beacon_status(),
    )


@contract.get("/version", response_model=VersionAnswer)
async def version(state: State) -> VersionAnswer:
    return VersionAnswer(
        slug=state.settings.slug,
        version=__version__,
        contract=1,
        capabilities=["get_weights", "proxy_routes"],
    )


@contract.get(
    "/internal/v1/get_weights",
    dependencies=[Depends(require_internal)],
    responses={200: {"model": WeightsPublic}, 401: {}, 403: {}, 409: {}, 503: {}},
)
def get_weights(state: State, epoch: Annotated[int, Query(ge=0, le=2**53 - 1)]) -> Response:
    """Weights for an epoch; the first answer is stored and repeated byte for byte."""
    return Response(weights.answer(state, epoch), media_type="application/json")


@contract.get("/metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """Prometheus text; the row counts are read under the writer lock (thread pool)."""
    state = getattr(request.app.state, "service", None)
    with state.lock if state is not None else contextlib.nullcontext():
        body = generate_latest(request.app.state.registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


@public.get("/beacon", response_model=BeaconPublic)
async def beacon(state: State) -> BeaconPublic:
    """The latest verified beacon round the service acts on."""
    cur = state.current
    return BeaconPublic(
        round=cur.round if cur else None, randomness=cur.randomness if cur else None
    )


@public.get("/weights/latest", responses={200: {"model": WeightsPublic}, 404: {}})
async def latest_weights(state: State) -> Response:
    """The newest epoch's ``get_weights`` answer, as stored (miners read their weight here)."""
    return Response(latest_weights_body(state.conn), media_type="application/json")


@admin.post("/metagraph/refresh", responses=ERRORS, response_model=MetagraphStatus)
async def refresh_metagraph(state: State) -> MetagraphStatus:
    await state.metagraph.refresh()
    return state.metagraph.status()


router = APIRouter()
for part in (contract, public, admin):
    router.include_router(part)
