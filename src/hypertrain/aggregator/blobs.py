"""Where the aggregator reads and writes blobs: a relay (with a disk cache) or memory.

The merge reads every update twice (norms first, then the weighted sum), so relay
downloads go through a content-addressed disk cache: the second pass, a
``verify-tape`` run or a rollback costs no network. Every read re-checks the
SHA-256, whatever the source, so a corrupted cache file is refused too.
A relay refusal about the blob itself becomes a :class:`BlobError` with the reason
the merge tape records (``missing_blob``, ``hash_mismatch``, ...), so a missing update
excludes one island; a relay that cannot be reached fails the step, which is retried.
Both sources also publish each blob's arrival record and their beacon clock
(:mod:`hypertrain.aggregator.availability`): the relay's ``x-hypertrain-arrival-round``,
and for memory the round set in ``arrivals`` (``0`` unless set; its clock ``now`` is
past every deadline unless set).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from hypertrain.aggregator.errors import BlobError
from hypertrain.relay.client import BlobKind, RelayClient
from hypertrain.relay.errors import RelayError


class BlobSource(Protocol):
    def get(self, sha256: str) -> bytes: ...


class BlobStore(BlobSource, Protocol):
    def put(self, data: bytes, *, kind: BlobKind, round: int) -> str: ...

    def url(self, sha256: str) -> str: ...

    def arrival_round(self, sha256: str) -> int | None: ...


def republish_missing(store: BlobStore, sha256: str, kind: BlobKind, round: int) -> bool:
    """Put a blob this aggregator published back on the relay when the relay no longer
    holds it (its disk was lost or replaced while a round still needs the blob): True
    when it was put again. Raises :class:`BlobError` (``missing_blob``) when neither the
    relay nor this aggregator's cache holds it."""
    try:
        store.arrival_round(sha256)
        return False
    except BlobError as exc:
        if exc.reason != "missing_blob":
            raise
    store.put(store.get(sha256), kind=kind, round=round)  # get: the disk cache first
    return True


def check_hash(sha256: str, data: bytes) -> bytes:
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise BlobError("hash_mismatch", f"blob {sha256[:16]}… hashes to {actual[:16]}…")
    return data


class MemoryBlobs:
    """A dict of blobs by SHA-256 (tests, benchmarks, offline verification)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.arrivals: dict[str, int] = {}  # beacon round of first arrival (default 0)
        self.now = 2**40  # the clock: past every deadline unless a test sets it

    def get(self, sha256: str) -> bytes:
        if sha256 not in self.data:
            raise BlobError("missing_blob", f"blob {sha256[:16]}… is not available")
        return check_hash(sha256, self.data[sha256])

    def arrival_round(self, sha256: str) -> int | None:
        if sha256 not in self.data:
            raise BlobError("missing_blob", f"blob {sha256[:16]}… is not available")
        return self.arrivals.get(sha256, 0)

    def clock_round(self) -> int:
        return self.now

    def put(self, data: bytes, *, kind: BlobKind, round: int) -> str:
        sha256 = hashlib.sha256(data).hexdigest()
        self.data[sha256] = data
        return sha256

    def url(self, sha256: str) -> str:
        return f"memory:{sha256}"


class RelayBlobs:
    """A relay plus a disk cache; ``expiry`` gives the envelope expiry round for uploads."""

    def __init__(
        self, relay: RelayClient, cache_dir: Path, expiry: Callable[[], int] = lambda: 2**40
    ) -> None:
        self.relay = relay
        self.cache_dir = cache_dir
        self.expiry = expiry

    def get(self, sha256: str) -> bytes:
        path = self.cache_dir / sha256
        if path.is_file():
            try:
                return check_hash(sha256, path.read_bytes())
            except BlobError:
                path.unlink(missing_ok=True)
        with _as_blob_error(sha256):
            self.relay.get_to_file(sha256, path)
        return check_hash(sha256, path.read_bytes())

    def arrival_round(self, sha256: str) -> int | None:
        """The relay's arrival record (asked afresh: a cached blob has none of its own)."""
        with _as_blob_error(sha256):
            return self.relay.arrival_round(sha256)

    def clock_round(self) -> int:
        return self.relay.beacon_round()

    def put(self, data: bytes, *, kind: BlobKind, round: int) -> str:
        with _as_blob_error(hashlib.sha256(data).hexdigest()):
            sha256 = self.relay.put(data, kind=kind, round=round, expiry_round=self.expiry())
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        (self.cache_dir / sha256).write_bytes(data)
        return sha256

    def url(self, sha256: str) -> str:
        return self.relay.url(sha256)


# relay refusals that are about the blob itself (the tape's reason codes); any other
# relay error (unreachable, overloaded) propagates, and the round is retried later
_REASONS = {
    "not_found": "missing_blob",
    "hash_mismatch": "hash_mismatch",
    "too_large": "too_large",
    "no_key": "no_key",
}


@contextmanager
def _as_blob_error(sha256: str) -> Iterator[None]:
    """Re-raise a relay refusal about this blob as a ``BlobError``."""
    try:
        yield
    except RelayError as exc:
        if exc.reason not in _REASONS:
            raise
        raise BlobError(_REASONS[exc.reason], f"blob {sha256[:16]}…: {exc.detail}") from exc
