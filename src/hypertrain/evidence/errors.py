"""Typed errors of verifying public records (shared by miners, auditors and parties)."""

from __future__ import annotations


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
