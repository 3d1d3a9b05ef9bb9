"""The FastAPI application: ``create_app(settings)`` and the lazy module attribute ``app``.

``uvicorn hypertrain.challenge.app:app`` builds the app from the environment on
first access (so importing this module has no side effects and tests build apps
from the factory). Startup opens the database, restores the last metagraph
snapshot, then two background loops drive the service: the beacon poll (the only
clock; every new verified round advances the round state machines) and the
metagraph refresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from hypertrain import __version__
from hypertrain.challenge import database
from hypertrain.challenge.competition import cycles
from hypertrain.challenge.errors import ChallengeError
from hypertrain.challenge.lifecycle import clock
from hypertrain.challenge.metagraph import MetagraphProvider, MetagraphView, parse_snapshot
from hypertrain.challenge.middleware import PrefixAndLimitMiddleware
from hypertrain.challenge.platform import weights
from hypertrain.challenge.platform.metrics import new_registry
from hypertrain.challenge.ports import BeaconRound, BeaconSource, LedgerPort
from hypertrain.challenge.routes import (
    admission,
    competition,
    dashboard,
    disputes,
    honeypots,
    platform,
    rounds,
    witness,
)
from hypertrain.challenge.settings import Settings, settings_from_env
from hypertrain.challenge.state import ServiceState, loads
from hypertrain.challenge.store import platform_storage, rounds_storage
from hypertrain.protocol.envelope import NON_CANONICAL

log = logging.getLogger(__name__)


def create_app(
    settings: Settings,
    *,
    beacon: BeaconSource | None = None,
    ledger: LedgerPort | None = None,
    metagraph: MetagraphProvider | None = None,
) -> FastAPI:
    """Build the service; the three parts default to the production wiring."""
    from hypertrain.challenge import wiring

    parts = _Parts(
        beacon=beacon or wiring.beacon_source(settings),
        ledger=ledger or wiring.ledger(settings),
        metagraph=metagraph or wiring.metagraph_provider(settings),
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = _open_state(settings, parts)
        app.state.service = state
        await _refresh_metagraph(state)
        try:
            await _poll_beacon(state)
        except ChallengeError as exc:  # e.g. no clock yet: requests refuse, the loop retries
            log.warning("first beacon step failed: %s", exc.detail)
        tasks = [
            asyncio.create_task(_every(settings.beacon_poll_s, _poll_beacon, state)),
            asyncio.create_task(_every(settings.metagraph_refresh_s, _refresh_metagraph, state)),
        ]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            app.state.service = None
            state.close()

    app = FastAPI(
        title="Hypertrain challenge service",
        version=__version__,
        lifespan=lifespan,
        strict_content_type=True,  # JSON only under a JSON content type: the middleware checks it
    )
    app.state.service = None
    app.state.registry, latency = new_registry(lambda: app.state.service)
    _install_handlers(app)
    routers = (platform, rounds, admission, disputes, honeypots, competition, dashboard, witness)
    for module in routers:
        app.include_router(module.router)

    app.add_middleware(
        PrefixAndLimitMiddleware,
        slug=settings.slug,
        max_body_bytes=settings.max_body_bytes,
        latency=latency,
    )
    return app


@dataclass(frozen=True, slots=True)
class _Parts:
    """The service's three outside parts (the clock, the ledger, the chain)."""

    beacon: BeaconSource
    ledger: LedgerPort
    metagraph: MetagraphProvider


def _open_state(settings: Settings, parts: _Parts) -> ServiceState:
    conn = database.connect(settings.state_dir)
    stored = platform_storage.snapshot(conn)
    initial = parse_snapshot(loads(stored), netuid=settings.netuid) if stored else None
    return ServiceState(
        settings=settings,
        conn=conn,
        reader=database.reader(settings.state_dir),
        metagraph=MetagraphView(parts.metagraph, initial),
        beacon=parts.beacon,
        ledger=parts.ledger,
        read_manifest=rounds_storage.manifest_json,
    )


async def _every(
    period_s: float, step: Callable[[ServiceState], Awaitable[None]], state: ServiceState
) -> None:
    while True:
        await asyncio.sleep(period_s)
        try:
            await step(state)
        except Exception:  # a loop must survive one bad tick; the error is logged
            log.exception("background step %s failed", step.__name__)


async def _refresh_metagraph(state: ServiceState) -> None:
    before = state.metagraph.snapshot
    fresh = await state.metagraph.refresh()
    if fresh is not None:  # stored with the hotkeys that left since the one before
        await state.offload(weights.note_snapshot, state.conn, before, fresh)


async def _poll_beacon(state: ServiceState) -> None:
    """Fetch the newest beacon round and advance on it. The newness check is made under
    the writer lock (in :func:`_advance`), so a poll returns only once the round it saw
    is fully processed, even when another poll took that round first and is still
    stepping the state machines on it."""
    try:
        latest = await asyncio.to_thread(state.beacon.latest)
    except ValueError as exc:
        log.warning("beacon poll failed: %s", exc)
        return
    await state.offload(_advance, state, latest)


def _advance(state: ServiceState, latest: BeaconRound) -> None:
    """Take a newer verified round and move every state machine (under the lock)."""
    if state.current is not None and latest.round <= state.current.round:
        return  # another poll took this round first
    state.current = latest
    clock.step(state)
    cycles.advance(state)


def _install_handlers(app: FastAPI) -> None:
    @app.exception_handler(ChallengeError)
    async def challenge_error(_: Request, exc: ChallengeError) -> JSONResponse:
        return JSONResponse({"error": exc.code, "detail": exc.detail}, status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg', 'invalid')}"
            for err in exc.errors()[:10]
        ]
        detail = "; ".join(problems) or "invalid request"
        if any(err.get("type") == NON_CANONICAL for err in exc.errors()):
            # a number canonical JSON cannot carry: a typed 400, as open_envelope refuses it
            return JSONResponse({"error": NON_CANONICAL, "detail": detail}, status_code=400)
        return JSONResponse({"error": "bad_request", "detail": detail}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(
            {"error": "http_error", "detail": str(exc.detail)}, status_code=exc.status_code
        )


_APP: FastAPI | None = None


def __getattr__(name: str) -> Any:
    """``app`` is built from the environment on first access (uvicorn's import string)."""
    global _APP
    if name != "app":
        raise AttributeError(name)
    if _APP is None:
        _APP = create_app(settings_from_env())
    return _APP
