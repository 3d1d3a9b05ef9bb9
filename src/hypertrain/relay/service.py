"""The relay's behaviour, independent of HTTP: authorise, ingest, look up, fill misses.

:class:`Relay` owns the store, the replay store, the upload accounting, the
registration check, the beacon clock and the optional upstream. Routes stay thin and
call it. Every refusal is a :class:`RelayError`; a refused upload never reaches the
store, and an existing blob is never rewritten.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import IO, Final

from starlette.concurrency import run_in_threadpool

from hypertrain.protocol.replay import ReplayStore
from hypertrain.relay.auth import Authorised, UploadPolicy, authorise_put
from hypertrain.relay.clock import BeaconClock
from hypertrain.relay.errors import NotFoundError
from hypertrain.relay.pipeline import spool_stream
from hypertrain.relay.quota import QuotaBook
from hypertrain.relay.registry import Registry
from hypertrain.relay.spool import Spool, validate_sha256
from hypertrain.relay.store import BlobStore
from hypertrain.relay.upstream import Upstream

log = logging.getLogger(__name__)

PRUNE_EVERY: Final = 256


@dataclass(frozen=True, slots=True)
class PutResult:
    """The outcome of an accepted upload."""

    sha256: str
    size: int
    created: bool
    forwarded: bool


@dataclass
class Relay:
    """One relay instance's state and operations."""

    store: BlobStore
    replay: ReplayStore
    quota: QuotaBook
    registry: Registry
    clock: BeaconClock
    policy: UploadPolicy
    max_round_bytes: int
    coordinators: frozenset[str]
    upstream: Upstream | None = None
    quota_window_rounds: int = 100
    _authorised: int = field(default=0, init=False)

    def quota_key(self) -> int:
        """The quota window an upload counts in, from the relay's own beacon clock.

        Never the round the uploader claims: a far-future claim would open a fresh,
        empty quota each time.
        """
        return self.clock.current_round() // self.quota_window_rounds

    def authorise(self, header: str | None, sha256: str) -> Authorised:
        """Check an upload's envelope (blocking: signature check, registry lookup)."""
        validate_sha256(sha256)
        current_round = self.clock.current_round()
        auth = authorise_put(
            header,
            sha256,
            policy=self.policy,
            current_round=current_round,
            is_registered=self._is_registered,
            replay=self.replay,
        )
        self._authorised += 1
        if self._authorised % PRUNE_EVERY == 0:
            # expired nonces are refused by the expiry check, so their records can go
            self.replay.prune(current_round)
        return auth

    def _is_registered(self, ss58: str) -> bool:
        return ss58 in self.coordinators or self.registry(ss58)

    async def put(self, auth: Authorised, body: AsyncIterator[bytes]) -> PutResult:
        """Stream an authorised upload into the store, then forward it upstream."""
        put = auth.put
        reserved = False
        window = self.quota_key()
        if auth.signer not in self.coordinators:
            reserved = await run_in_threadpool(
                self.quota.reserve, auth.signer, window, put.sha256, put.size,
                self.max_round_bytes,
            )  # fmt: skip
        try:
            spool = Spool(self.store.spool_dir, put.sha256, put.size, self.policy.max_blob_bytes)
            try:
                await spool_stream(spool, body)
                spooled = await run_in_threadpool(spool.finish)
            except BaseException:
                spool.abort()
                raise
            created = await run_in_threadpool(self.store.commit, put.sha256, spooled)
        except BaseException:
            if reserved:
                await run_in_threadpool(self.quota.release, auth.signer, window, put.sha256)
            raise
        log.info(
            "stored blob %s (%d bytes, %s, round %d) from %s%s",
            put.sha256, put.size, put.kind, put.round, auth.signer,
            "" if created else " (already held)",
        )  # fmt: skip
        forwarded = await self._forward(auth)
        return PutResult(put.sha256, put.size, created, forwarded)

    async def _forward(self, auth: Authorised) -> bool:
        if self.upstream is None:
            return False
        sha256 = auth.put.sha256
        if await self.upstream.size(sha256) is not None:
            return True
        handle = await run_in_threadpool(self.store.open, sha256)
        try:
            await self.upstream.forward(sha256, auth.header, handle, auth.put.size)
        finally:
            handle.close()
        log.info("forwarded blob %s upstream to %s", sha256, self.upstream.base_url)
        return True

    async def size(self, sha256: str) -> int:
        """The blob's size here, else upstream; raises :class:`NotFoundError`."""
        validate_sha256(sha256)
        size = await run_in_threadpool(self.store.size, sha256)
        if size is None and self.upstream is not None:
            size = await self.upstream.size(sha256)
        if size is None:
            raise NotFoundError(sha256)
        return size

    async def arrival(self, sha256: str) -> int | None:
        """The beacon round of the blob's first arrival at the origin relay: this relay's
        store's record, or with an upstream the upstream's (None: no record)."""
        validate_sha256(sha256)
        if self.upstream is not None:
            return await self.upstream.arrival(sha256)
        arrived = await run_in_threadpool(self.store.arrived, sha256)
        return None if arrived is None else self.clock.round_at(arrived)

    async def open(self, sha256: str) -> tuple[IO[bytes], int]:
        """Open a blob for reading, filling a miss from upstream (verified) first."""
        validate_sha256(sha256)
        size = await run_in_threadpool(self.store.size, sha256)
        if size is None:
            if self.upstream is None:
                raise NotFoundError(sha256)
            size = await self._fill_from_upstream(sha256)
        handle = await run_in_threadpool(self.store.open, sha256)
        return handle, size

    async def _fill_from_upstream(self, sha256: str) -> int:
        assert self.upstream is not None
        spool = Spool(self.store.spool_dir, sha256, None, self.policy.max_blob_bytes)
        try:
            await self.upstream.fetch(sha256, spool)
            spooled = await run_in_threadpool(spool.finish)
        except BaseException:
            spool.abort()
            raise
        size = spool.received
        await run_in_threadpool(self.store.commit, sha256, spooled)
        log.info("cached blob %s (%d bytes) from upstream", sha256, size)
        return size

    def close(self) -> None:
        self.replay.close()
        self.quota.close()
