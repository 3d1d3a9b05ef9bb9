"""Who is registered on the subnet: metagraph snapshots and the providers that fetch them.

A snapshot is ``{"epoch", "block", "netuid", "hotkeys": {ss58: uid}}``, the shape the
platform master serves at ``/v1/metagraph/latest``. Providers: the master (production
default), a JSON snapshot file (devnet, tests) and the live chain through the
Bittensor SDK (optional ``chain`` extra, imported only when chosen). A snapshot is
checked before it is used (netuid, addresses, UID range, epoch never going back);
:class:`MetagraphView` keeps the last good one when a refresh fails and reports that.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hypertrain.api.models import MetagraphStatus
from hypertrain.challenge.errors import MetagraphError, UnavailableError
from hypertrain.protocol.canonical import parse_json
from hypertrain.protocol.errors import ProtocolError
from hypertrain.protocol.identity import ss58_decode

log = logging.getLogger(__name__)
MAX_HOTKEYS: Final = 65536


class _SnapshotModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    epoch: int = Field(ge=0, le=2**53 - 1)
    block: int = Field(ge=0, le=2**53 - 1)
    netuid: int = Field(ge=0, le=65535)
    hotkeys: dict[str, int]


@dataclass(frozen=True, slots=True)
class Snapshot:
    epoch: int
    block: int
    netuid: int
    hotkeys: dict[str, int]

    def to_json(self) -> dict[str, int | dict[str, int]]:
        return {
            "epoch": self.epoch,
            "block": self.block,
            "netuid": self.netuid,
            "hotkeys": dict(self.hotkeys),
        }


def parse_snapshot(value: Any, *, netuid: int) -> Snapshot:
    """Check and convert a snapshot document; raises :class:`MetagraphError`."""
    try:
        model = _SnapshotModel.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "snapshot"
        raise MetagraphError(f"metagraph snapshot {where}: {first['msg']}") from None
    if model.netuid != netuid:
        raise MetagraphError(f"metagraph is for netuid {model.netuid}, expected {netuid}")
    if len(model.hotkeys) > MAX_HOTKEYS:
        raise MetagraphError(f"metagraph lists {len(model.hotkeys)} hotkeys, limit {MAX_HOTKEYS}")
    for hotkey, uid in model.hotkeys.items():
        try:
            ss58_decode(hotkey)
        except ProtocolError as exc:
            raise MetagraphError(f"metagraph hotkey: {exc}") from None
        if not 0 <= uid < MAX_HOTKEYS:
            raise MetagraphError(f"metagraph uid {uid} of {hotkey} is out of range")
    return Snapshot(model.epoch, model.block, model.netuid, dict(model.hotkeys))


def departures(old: Snapshot, new: Snapshot) -> dict[str, int | None]:
    """hotkey -> its uid in ``new`` (None: gone) for every hotkey of ``old`` that left.

    A hotkey left when ``new`` no longer lists it, or lists it under another uid: on
    chain a uid changes only by deregistration and a new registration, so the old
    registration's value must not carry over to the new one.
    """
    out: dict[str, int | None] = {}
    for hotkey, uid in sorted(old.hotkeys.items()):
        now = new.hotkeys.get(hotkey)
        if now != uid:
            out[hotkey] = now
    return out


class MetagraphProvider(Protocol):
    async def fetch(self) -> Snapshot: ...


class MasterMetagraph:
    """The platform master's ``GET /v1/metagraph/latest``."""

    def __init__(self, master_url: str, netuid: int, *, timeout_s: float = 10.0) -> None:
        self._url = master_url.rstrip("/") + "/v1/metagraph/latest"
        self._netuid = netuid
        self._timeout_s = timeout_s

    async def fetch(self) -> Snapshot:
        try:
            async with httpx.AsyncClient(timeout=self._timeout_s) as client:
                response = await client.get(self._url)
        except httpx.HTTPError as exc:
            raise MetagraphError(f"master unreachable: {type(exc).__name__}") from None
        if response.status_code == 503:
            raise MetagraphError("master has no metagraph yet (503)")
        if response.status_code != 200:
            raise MetagraphError(f"master answered {response.status_code}")
        try:
            value = parse_json(response.content)
        except ProtocolError as exc:
            raise MetagraphError(f"master sent bad JSON: {exc}") from None
        return parse_snapshot(value, netuid=self._netuid)


class FileMetagraph:
    """A snapshot JSON file in the master's shape, re-read on every refresh."""

    def __init__(self, path: Path, netuid: int) -> None:
        self._path = path
        self._netuid = netuid

    async def fetch(self) -> Snapshot:
        try:
            raw = await asyncio.to_thread(self._path.read_bytes)
            value = parse_json(raw)
        except OSError as exc:
            raise MetagraphError(f"cannot read metagraph file: {exc.strerror}") from None
        except ProtocolError as exc:
            raise MetagraphError(f"metagraph file is not valid JSON: {exc}") from None
        return parse_snapshot(value, netuid=self._netuid)


class ChainMetagraph:
    """The live chain via the Bittensor SDK (``pip install hypertrain[chain]``)."""

    def __init__(self, network: str, netuid: int) -> None:
        self._network = network
        self._netuid = netuid

    async def fetch(self) -> Snapshot:
        return await asyncio.to_thread(self._fetch_sync)

    def _fetch_sync(self) -> Snapshot:
        try:
            import bittensor  # optional extra; never imported by tests
        except ImportError:
            raise MetagraphError("the chain metagraph needs the 'chain' extra") from None
        try:
            subtensor = bittensor.Subtensor(network=self._network)
            meta = subtensor.metagraph(self._netuid)
            block = int(subtensor.get_current_block())
            tempo = max(1, int(subtensor.tempo(self._netuid) or 360))
        except Exception as exc:  # the SDK raises many unrelated types
            raise MetagraphError(f"chain query failed: {type(exc).__name__}") from None
        hotkeys = {str(h): int(u) for h, u in zip(meta.hotkeys, meta.uids, strict=True)}
        value = {"epoch": block // (tempo + 1), "block": block, "netuid": self._netuid}
        return parse_snapshot({**value, "hotkeys": hotkeys}, netuid=self._netuid)


class MetagraphView:
    """The last good snapshot plus whether the latest refresh succeeded."""

    def __init__(self, provider: MetagraphProvider, initial: Snapshot | None = None) -> None:
        self._provider = provider
        self.snapshot = initial
        self.stale = initial is not None
        self.last_error = "not refreshed yet" if initial is not None else ""
        self.refreshed_at = 0.0

    def is_registered(self, hotkey: str) -> bool:
        return self.snapshot is not None and hotkey in self.snapshot.hotkeys

    def epoch_now(self, what: str) -> int:
        """The epoch every reward and bond entry is booked at (never a fallback)."""
        if self.snapshot is None:
            raise UnavailableError(f"cannot {what}: no metagraph snapshot yet", code="no_metagraph")
        return self.snapshot.epoch

    async def refresh(self) -> Snapshot | None:
        """Fetch a new snapshot; on failure keep the old one and mark it stale."""
        try:
            fresh = await self._provider.fetch()
        except MetagraphError as exc:
            self.stale, self.last_error = True, exc.detail
            log.warning("metagraph refresh failed: %s", exc.detail)
            return None
        if self.snapshot is not None and fresh.epoch < self.snapshot.epoch:
            self.stale = True
            self.last_error = f"epoch went back from {self.snapshot.epoch} to {fresh.epoch}"
            return None
        self.snapshot, self.stale, self.last_error = fresh, False, ""
        self.refreshed_at = time.time()
        return fresh

    def status(self) -> MetagraphStatus:
        snap = self.snapshot
        return MetagraphStatus(
            epoch=snap.epoch if snap else None,
            block=snap.block if snap else None,
            hotkeys=len(snap.hotkeys) if snap else 0,
            stale=self.stale,
            error=self.last_error,
        )
