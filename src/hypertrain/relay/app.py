"""The relay's FastAPI application factory: ``create_app(settings)``.

Everything stateful is built here from :class:`RelaySettings` (store, replay store,
upload accounting, registration check, beacon clock, upstream client); tests inject
their own registry, clock or upstream transport instead of patching globals.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from hypertrain.protocol.replay import ReplayStore
from hypertrain.relay.auth import UploadPolicy
from hypertrain.relay.clock import BeaconClock
from hypertrain.relay.errors import RelayError
from hypertrain.relay.quota import QuotaBook
from hypertrain.relay.registry import MetagraphRegistry, Registry, StaticRegistry
from hypertrain.relay.routes import router
from hypertrain.relay.service import Relay
from hypertrain.relay.settings import RelaySettings
from hypertrain.relay.store import open_store
from hypertrain.relay.upstream import Upstream


def _nobody(_ss58: str) -> bool:
    return False


def registry_from_settings(settings: RelaySettings) -> Registry:
    """The registration check the settings name (coordinators are added by the relay)."""
    if settings.allow_list is not None:
        return StaticRegistry(settings.allow_list)
    if settings.metagraph_url is not None:
        return MetagraphRegistry(settings.metagraph_url, refresh_s=settings.metagraph_refresh_s)
    return _nobody


def build_relay(
    settings: RelaySettings,
    *,
    registry: Registry | None = None,
    clock: BeaconClock | None = None,
    upstream_client: httpx.AsyncClient | None = None,
) -> Relay:
    """Open every store and client the settings describe."""
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    upstream = None
    if settings.upstream is not None:
        client = upstream_client or httpx.AsyncClient(timeout=settings.upstream_timeout_s)
        upstream = Upstream(settings.upstream, client)
    clock = clock or BeaconClock(settings.beacon_genesis_unix, settings.beacon_period_s)
    return Relay(
        store=open_store(settings.storage, settings.state_dir, clock.now),
        replay=ReplayStore(settings.state_dir / "replay.sqlite"),
        quota=QuotaBook(settings.state_dir / "uploads.sqlite"),
        registry=registry or registry_from_settings(settings),
        clock=clock,
        policy=UploadPolicy(
            run_ids=settings.served_runs,
            max_blob_bytes=settings.max_blob_bytes,
            max_lifetime_rounds=settings.max_lifetime_rounds,
        ),
        max_round_bytes=settings.max_round_bytes,
        quota_window_rounds=settings.quota_window_rounds,
        coordinators=settings.coordinators,
        upstream=upstream,
    )


async def _relay_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RelayError)
    return JSONResponse({"error": exc.reason, "detail": exc.detail}, status_code=exc.status)


def create_app(
    settings: RelaySettings,
    *,
    registry: Registry | None = None,
    clock: BeaconClock | None = None,
    upstream_client: httpx.AsyncClient | None = None,
) -> FastAPI:
    """A relay application; its stores are opened now and closed at shutdown."""
    relay = build_relay(settings, registry=registry, clock=clock, upstream_client=upstream_client)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        relay.replay.prune(relay.clock.current_round())
        yield
        if relay.upstream is not None and upstream_client is None:
            await relay.upstream.aclose()
        relay.close()

    app = FastAPI(title="hypertrain relay", version="1", lifespan=lifespan)
    app.state.relay = relay
    app.state.settings = settings
    app.include_router(router)
    app.add_exception_handler(RelayError, _relay_error)
    return app
