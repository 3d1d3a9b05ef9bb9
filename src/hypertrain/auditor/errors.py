"""Typed errors of the auditor (and of the verified-input helpers the miner shares)."""

from __future__ import annotations


class AuditError(ValueError):
    """Base class: something an audit or a round preparation cannot accept."""


class VerificationError(AuditError):
    """A record, blob, checkpoint or sample failed verification against a committed hash."""


class IslandInputError(VerificationError):
    """An input the island authored could not be fetched, parsed or proven.

    The island made these bytes (its commit's body, checkpoint reference, index and
    checkpoints), so the auditor answers with an ``unverifiable`` verdict: a fault of
    the island, never a reason to stop auditing the others.
    """
