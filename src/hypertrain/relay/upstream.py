"""Talking to an upstream relay: forward uploads, fetch misses, ask what it holds.

A regional relay forwards each upload with the uploader's own envelope (the upstream
verifies it afresh against its own replay store and limits), and fills a cache miss
by streaming the upstream's bytes through a :class:`Spool`, so a lying upstream can
never plant bytes under the wrong hash.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import IO

import anyio
import httpx

from hypertrain.relay.arrival import ARRIVAL_HEADER, parse_arrival
from hypertrain.relay.errors import NotFoundError, UpstreamError
from hypertrain.relay.models import receipt_problem
from hypertrain.relay.pipeline import spool_stream
from hypertrain.relay.spool import CHUNK_BYTES, Spool


class Upstream:
    """An async client for the upstream relay at ``base_url``."""

    def __init__(self, base_url: str, client: httpx.AsyncClient) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = client

    async def aclose(self) -> None:
        await self._client.aclose()

    def _url(self, sha256: str) -> str:
        return f"{self.base_url}/blobs/{sha256}"

    async def _head(self, sha256: str) -> httpx.Response | None:
        """The upstream's HEAD answer for the blob (None: it does not hold it)."""
        try:
            resp = await self._client.head(self._url(sha256))
        except httpx.HTTPError as exc:
            raise UpstreamError(f"HEAD {self._url(sha256)}: {exc}") from exc
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise UpstreamError(f"HEAD {self._url(sha256)} answered {resp.status_code}")
        return resp

    async def size(self, sha256: str) -> int | None:
        """The blob's size upstream, or None if the upstream does not hold it."""
        resp = await self._head(sha256)
        return None if resp is None else int(resp.headers.get("content-length", "0"))

    async def arrival(self, sha256: str) -> int | None:
        """The upstream's arrival record of the blob (None: not held, or no record)."""
        resp = await self._head(sha256)
        return None if resp is None else parse_arrival(resp.headers.get(ARRIVAL_HEADER))

    async def fetch(self, sha256: str, spool: Spool) -> None:
        """Stream the upstream's copy into ``spool`` (the caller verifies it)."""
        try:
            async with self._client.stream("GET", self._url(sha256)) as resp:
                if resp.status_code == 404:
                    raise NotFoundError(sha256)
                if resp.status_code != 200:
                    raise UpstreamError(f"GET {self._url(sha256)} answered {resp.status_code}")
                await spool_stream(spool, resp.aiter_bytes())
        except httpx.HTTPError as exc:
            raise UpstreamError(f"GET {self._url(sha256)}: {exc}") from exc

    async def forward(self, sha256: str, authorization: str, handle: IO[bytes], size: int) -> None:
        """PUT a stored blob upstream under the uploader's authorisation."""
        headers = {
            "authorization": authorization,
            "content-length": str(size),
            "content-type": "application/octet-stream",
        }
        try:
            resp = await self._client.put(
                self._url(sha256), content=_read_async(handle), headers=headers
            )
        except httpx.HTTPError as exc:
            raise UpstreamError(f"PUT {self._url(sha256)}: {exc}") from exc
        if resp.status_code not in (200, 201):
            raise UpstreamError(
                f"PUT {self._url(sha256)} answered {resp.status_code}: {resp.text[:300]}"
            )
        problem = receipt_problem(resp.content, sha256, size)
        if problem is not None:
            raise UpstreamError(f"PUT {self._url(sha256)} answered {problem}")


async def _read_async(handle: IO[bytes]) -> AsyncIterator[bytes]:
    while chunk := await anyio.to_thread.run_sync(handle.read, CHUNK_BYTES):
        yield chunk
