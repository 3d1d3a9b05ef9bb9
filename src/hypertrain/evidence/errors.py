"""Typed errors of verifying public records (shared by miners, auditors and parties)."""

from __future__ import annotations

from hypertrain.protocol.messages import Commit


class EvidenceError(ValueError):
    """Base class: a public record or input that cannot be accepted."""


class VerificationError(EvidenceError):
    """A record, blob, checkpoint or sample failed verification against a committed hash."""


class IslandInputError(VerificationError):
    """An input the island authored could not be fetched, parsed or proven.

    The island made these bytes (its commit's body, checkpoint reference, index and
    checkpoints), so the auditor answers with an ``unverifiable`` verdict: a fault of
    the island, never a reason to stop auditing the others.
    """


class CoordinatorError(VerificationError):
    """The run names no coordinator (and none is pinned): no record the coordinator
    signs (manifest, round opens, audit assignments) can be checked. A configuration
    error of the run or of the role, never a reason to trust an unsigned record."""


class CommitRoundError(IslandInputError):
    """A commit its island signed for another round than the one it is offered for
    (``commit``: its body, which names the other round)."""

    def __init__(self, message: str, commit: Commit) -> None:
        super().__init__(message)
        self.commit = commit
