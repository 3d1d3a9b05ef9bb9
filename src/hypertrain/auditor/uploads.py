"""Uploads an assignment still waits for: a withheld upload delays only its own verdict.

An island uploads what it was selected for (the start checkpoints of its selected
segments and, under ``carry``, its previous round's carried state) after the
selection, until the upload deadline. Inside :func:`judging_ready`, the auditor does not
wait for such a blob when the relay does not hold it yet: it raises
:class:`UploadPending`, and :func:`~hypertrain.auditor.runner.audit_round` sets the
assignment aside, judges and posts every other one, and only then polls the blobs the
set-aside ones wait for, judging each as soon as its blob arrives or its deadline
passes (then ``unverifiable``, as before). No island-controlled wait delays the verdict
on another island. Outside :func:`judging_ready` (a dispute party, a one-off judge) the
auditor waits for the blob as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol, runtime_checkable

from hypertrain.evidence.errors import IslandInputError
from hypertrain.relay.errors import NotFoundError, RelayError

# blob faults that are the island's (the relay holds something, the judge decides)
ISLAND_BLOB_FAULTS = frozenset({"too_large", "size_mismatch"})

_READY_ONLY: ContextVar[bool] = ContextVar("hypertrain_auditor_ready_only", default=False)


class NotCountedError(IslandInputError):
    """A held blob whose arrival the relay has not counted by the upload deadline:
    ``arrived`` is its first arrival round, None while the relay has no record of it (a
    regional copy not forwarded to the origin yet, which the island's upload may still
    bring before the deadline)."""

    def __init__(self, message: str, arrived: int | None) -> None:
        super().__init__(message)
        self.arrived = arrived


class UploadPending(Exception):  # noqa: N818 (a state, not a failure)
    """An awaited blob the relay does not hold yet, before its upload deadline."""

    def __init__(self, sha256: str, deadline: int) -> None:
        super().__init__(f"waiting for {sha256[:16]}… until beacon round {deadline}")
        self.sha256, self.deadline = sha256, deadline


@contextmanager
def judging_ready() -> Iterator[None]:
    """Within this block an awaited blob that is missing raises :class:`UploadPending`."""
    token = _READY_ONLY.set(True)
    try:
        yield
    finally:
        _READY_ONLY.reset(token)


def ready_only() -> bool:
    """Whether a missing awaited blob is set aside (inside :func:`judging_ready`)."""
    return _READY_ONLY.get()


@runtime_checkable
class ArrivalRecords(Protocol):
    """A relay that says when it first received a blob (``RelayClient``)."""

    def arrival_round(self, sha256: str) -> int | None: ...


def check_arrival(relay: object, sha256: str, deadline: int) -> None:
    """A selected blob counts only if the relay's arrival record says it first arrived
    by the upload deadline: one rule however late an auditor (or a re-audit) looks, so a
    blob uploaded after the deadline is withheld (``IslandInputError``)."""
    if not isinstance(relay, ArrivalRecords):
        return  # a source without arrival records (tests' in-memory relays)
    arrived = relay.arrival_round(sha256)
    if arrived is None or arrived > deadline:
        when = "without an arrival record" if arrived is None else f"at {arrived}"
        raise NotCountedError(
            f"checkpoint {sha256[:16]}… reached the relay {when}, after the upload"
            f" deadline (beacon round {deadline})",
            arrived,
        )


@runtime_checkable
class HeldBlobs(Protocol):
    """A relay that says whether it holds a blob without sending it (``RelayClient``)."""

    def exists(self, sha256: str) -> int | None: ...


class BlobSource(Protocol):
    def get(self, sha256: str, *, max_bytes: int = ...) -> bytes: ...


def held(relay: BlobSource, sha256: str) -> bool:
    """Whether ``relay`` holds ``sha256`` now; a transport failure raises."""
    if isinstance(relay, HeldBlobs):
        return relay.exists(sha256) is not None
    try:  # a source that can only send blobs (tests' in-memory relays)
        relay.get(sha256, max_bytes=1 << 40)
    except NotFoundError:
        return False
    except RelayError as exc:
        if exc.reason not in ISLAND_BLOB_FAULTS:
            raise
    return True
