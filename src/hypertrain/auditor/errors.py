"""Typed errors of the auditor (and of the verified-input helpers the miner shares)."""

from __future__ import annotations


class AuditError(ValueError):
    """Base class: something an audit or a round preparation cannot accept."""


class VerificationError(AuditError):
    """A record, blob, checkpoint or sample failed verification against a committed hash."""
