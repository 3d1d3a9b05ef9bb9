"""HTTP routes of the relay: ``PUT``/``GET``/``HEAD /blobs/{sha256}`` and ``/healthz``.

Handlers only translate between HTTP and :class:`~hypertrain.relay.service.Relay`.
Blobs are immutable, so a GET answers with a strong ETag (the hash itself) and may be
cached forever by anyone in between. HEAD carries the blob's arrival record
(``x-hypertrain-arrival-round``, :mod:`hypertrain.relay.arrival`) where one is kept, and
so does GET on a relay without an upstream (a regional relay's GET serves its cache
without asking the upstream; its HEAD asks).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Annotated, Final

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from hypertrain.relay.arrival import ARRIVAL_HEADER
from hypertrain.relay.errors import SizeMismatchError
from hypertrain.relay.models import BlobStored, RelayHealth
from hypertrain.relay.service import Relay

router = APIRouter()

# One worker-thread hop per read. Larger reads would not help on Python 3.11: asyncio
# copies whatever the socket does not take at once into its write buffer and trims
# that buffer from the front after every send, which costs more as the chunk grows.
SEND_BYTES: Final = 1 << 20


def get_relay(request: Request) -> Relay:
    relay: Relay = request.app.state.relay
    return relay


RelayDep = Annotated[Relay, Depends(get_relay)]


def _blob_headers(sha256: str, size: int, arrival: int | None) -> dict[str, str]:
    headers = {
        "content-length": str(size),
        "content-type": "application/octet-stream",
        "etag": f'"{sha256}"',
        "cache-control": "public, max-age=31536000, immutable",
    }
    if arrival is not None:
        headers[ARRIVAL_HEADER] = str(arrival)
    return headers


@router.put(
    "/blobs/{sha256}",
    status_code=201,
    responses={200: {"model": BlobStored}, 201: {"model": BlobStored}},
)
async def put_blob(sha256: str, request: Request, relay: RelayDep) -> JSONResponse:
    """Store a blob under its SHA-256; needs ``Authorization: Envelope ...``."""
    auth = await run_in_threadpool(relay.authorise, request.headers.get("authorization"), sha256)
    declared = request.headers.get("content-length")
    if declared is not None and declared != str(auth.put.size):
        raise SizeMismatchError(
            f"Content-Length is {declared}, the envelope announces {auth.put.size} bytes"
        )
    result = await relay.put(auth, request.stream())
    body = BlobStored(
        sha256=result.sha256, size=result.size, created=result.created, forwarded=result.forwarded
    )
    return JSONResponse(body.model_dump(), status_code=201 if result.created else 200)


@router.get("/blobs/{sha256}")
async def get_blob(sha256: str, relay: RelayDep) -> StreamingResponse:
    """Stream a blob (fetching it from upstream first on a miss)."""
    handle, size = await relay.open(sha256)
    try:  # a regional relay serves its cache without asking upstream (HEAD does)
        arrival = await relay.arrival(sha256) if relay.upstream is None else None
    except BaseException:
        handle.close()
        raise
    return StreamingResponse(_iter_file(handle), headers=_blob_headers(sha256, size, arrival))


@router.head("/blobs/{sha256}")
async def head_blob(sha256: str, relay: RelayDep) -> Response:
    """Whether a blob is held here (or upstream), its size and its arrival round."""
    size = await relay.size(sha256)
    return Response(headers=_blob_headers(sha256, size, await relay.arrival(sha256)))


@router.get("/healthz")
async def healthz(relay: RelayDep) -> RelayHealth:
    upstream = relay.upstream.base_url if relay.upstream is not None else None
    return RelayHealth(ok=True, upstream=upstream, beacon_round=relay.clock.current_round())


def _iter_file(handle: IO[bytes]) -> Iterator[bytes]:
    try:
        while chunk := handle.read(SEND_BYTES):
            yield chunk
    finally:
        handle.close()
