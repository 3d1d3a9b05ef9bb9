"""The live dashboard: a static page shipped in the package plus its JSON view.

``GET /dashboard/`` serves ``index.html``; ``/dashboard/app.js``, ``chart.js``,
``panels.js`` and ``style.css`` its assets (no CDN, no build step, works offline). The
page uses relative URLs, so it also works behind the platform's
``/challenge/<slug>/`` proxy prefix. ``GET /v1/runs/{run_id}/dashboard`` is the
one read-only document the page polls; ``PUT /admin/v1/runs/{run_id}/baseline`` is the
operator's data-parallel curve it draws beside the run's (informational only).
"""

from __future__ import annotations

from importlib import resources
from typing import Final

from fastapi import APIRouter, Depends
from fastapi.responses import RedirectResponse, Response

from hypertrain.api.baseline import BaselineIn, BaselinePublic
from hypertrain.challenge.dashboard import baseline, document
from hypertrain.challenge.dashboard.models import Dashboard
from hypertrain.challenge.deps import ERRORS, RunId, State, require_admin, serialized
from hypertrain.challenge.errors import NotFoundError

public = APIRouter(tags=["dashboard"])
admin = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)], tags=["dashboard"])
ASSETS: Final[dict[str, str]] = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "chart.js": "text/javascript; charset=utf-8",
    "panels.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "competition.html": "text/html; charset=utf-8",
    "competition.js": "text/javascript; charset=utf-8",
    "mine.html": "text/html; charset=utf-8",
}
_HEADERS: Final = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


def asset_bytes(name: str) -> bytes:
    """One shipped dashboard file, read from the installed package."""
    return resources.files("hypertrain.challenge.dashboard").joinpath(name).read_bytes()


@public.get("/dashboard", include_in_schema=False)
async def dashboard_redirect() -> RedirectResponse:
    return RedirectResponse("dashboard/", status_code=307)


@public.get("/dashboard/", include_in_schema=False)
async def dashboard_page() -> Response:
    return Response(asset_bytes("index.html"), media_type=ASSETS["index.html"], headers=_HEADERS)


@public.get("/dashboard/{name}", include_in_schema=False)
async def dashboard_asset(name: str) -> Response:
    if name not in ASSETS:
        raise NotFoundError(f"no dashboard asset {name!r}", code="not_found")
    return Response(asset_bytes(name), media_type=ASSETS[name], headers=_HEADERS)


@public.get("/v1/runs/{run_id}/dashboard", response_model=Dashboard)
@serialized
def dashboard_view(state: State, run_id: RunId) -> Dashboard:
    """Everything the dashboard draws for one run, from one consistent read."""
    return document.dashboard(state, run_id)


@admin.put("/runs/{run_id}/baseline", responses=ERRORS, response_model=BaselinePublic)
@serialized
def put_baseline(state: State, run_id: RunId, payload: BaselineIn) -> BaselinePublic:
    """Publish the run's data-parallel baseline curve (its held-out loss after each round,
    at most the run's planned rounds), replacing the one before; the dashboard's loss chart
    draws it. Informational only: it never feeds a hash, a verdict or a reward."""
    manifest = state.manifest(run_id)  # unknown_run (404) first
    return baseline.publish(state.conn, manifest, run_id, payload, state.current_round)


router = APIRouter()
for part in (public, admin):
    router.include_router(part)
