"""Who may upload: pluggable registration checks (allow-list file or metagraph URL).

A registry is any ``Callable[[str], bool]`` answering "is this SS58 hotkey registered?".
Two are provided: :class:`StaticRegistry` reads a JSON file (a list of SS58 addresses,
or a metagraph snapshot ``{"hotkeys": {ss58: uid}}``) and re-reads it when it changes;
:class:`MetagraphRegistry` polls a ``/v1/metagraph/latest`` URL. Both fail closed: an
unreadable source means nobody (but the coordinator) is registered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import httpx

from hypertrain.protocol.canonical import parse_json
from hypertrain.protocol.errors import ProtocolError
from hypertrain.relay.errors import RelayError

log = logging.getLogger(__name__)

Registry = Callable[[str], bool]
MAX_SNAPSHOT_BYTES: Final = 64 << 20


def parse_hotkeys(raw: bytes, source: str) -> frozenset[str]:
    """Hotkeys from a JSON list of SS58 strings or a ``{"hotkeys": {ss58: uid}}`` snapshot."""
    try:
        doc: Any = parse_json(raw, max_bytes=MAX_SNAPSHOT_BYTES)
    except ProtocolError as exc:
        raise RelayError("bad_registry", f"{source}: {exc}") from exc
    if isinstance(doc, dict):
        doc = doc.get("hotkeys")
        if isinstance(doc, dict):
            doc = list(doc)
    if not isinstance(doc, list) or not all(isinstance(h, str) for h in doc):
        raise RelayError(
            "bad_registry",
            f'{source}: expected a JSON list of SS58 hotkeys or {{"hotkeys": {{ss58: uid}}}}',
        )
    return frozenset(doc)


def with_coordinators(registry: Registry, coordinators: frozenset[str]) -> Registry:
    """A registry that also admits the coordinator hotkeys."""

    def check(ss58: str) -> bool:
        return ss58 in coordinators or registry(ss58)

    return check


class StaticRegistry:
    """An allow-list file, re-read whenever its modification time changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._mtime_ns = -1
        self._hotkeys: frozenset[str] = frozenset()
        self._load()  # a bad file at start-up is an operator error: raise it

    def _load(self) -> None:
        stat = self.path.stat()
        if stat.st_mtime_ns == self._mtime_ns:
            return
        self._hotkeys = parse_hotkeys(self.path.read_bytes(), str(self.path))
        self._mtime_ns = stat.st_mtime_ns

    def __call__(self, ss58: str) -> bool:
        with self._lock:
            try:
                self._load()
            except (OSError, RelayError) as exc:
                log.error("allow-list unreadable, refusing uploads: %s", exc)
                return False
            return ss58 in self._hotkeys


class MetagraphRegistry:
    """The hotkeys of the latest metagraph snapshot served at ``url``, cached ``refresh_s``."""

    def __init__(
        self,
        url: str,
        *,
        refresh_s: float = 60.0,
        max_stale_s: float = 600.0,
        client: httpx.Client | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self._refresh_s = refresh_s
        self._max_stale_s = max_stale_s
        self._client = client or httpx.Client(timeout=10.0)
        self._clock = clock
        self._lock = threading.Lock()
        self._hotkeys: frozenset[str] = frozenset()
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None

    def _refresh(self) -> None:
        now = self._clock()
        if self._attempted_at is not None and now - self._attempted_at < self._refresh_s:
            return
        self._attempted_at = now
        try:
            resp = self._client.get(self.url)
            resp.raise_for_status()
            self._hotkeys = parse_hotkeys(resp.content, self.url)
            self._fetched_at = now
        except (httpx.HTTPError, RelayError) as exc:
            log.warning("metagraph fetch from %s failed: %s", self.url, exc)
            if self._fetched_at is None or now - self._fetched_at > self._max_stale_s:
                self._hotkeys = frozenset()  # too stale to trust: fail closed

    def __call__(self, ss58: str) -> bool:
        with self._lock:
            self._refresh()
            return ss58 in self._hotkeys
