"""Typed errors for everything the protocol layer refuses.

Every decoder raises a subclass of :class:`ProtocolError` (itself a ``ValueError``)
with a message a person can act on; none lets an unrelated exception escape.
"""

from __future__ import annotations


class ProtocolError(ValueError):
    """Base class: input from a user or a peer that the protocol refuses."""


class CanonicalJSONError(ProtocolError):
    """A JSON document is malformed or outside the canonical (JCS / I-JSON) domain."""


class MerkleError(ProtocolError):
    """A Merkle tree or inclusion proof is malformed or does not verify."""


class IdentityError(ProtocolError):
    """A key, SS58 address, signature or wallet file is malformed or does not verify."""


class EnvelopeError(ProtocolError):
    """A signed envelope is refused; ``reason`` is a short machine-readable code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.detail = message


class ReplayError(EnvelopeError):
    """An envelope's (signer, nonce) pair was already accepted."""

    def __init__(self, message: str) -> None:
        super().__init__("replayed", message)


class DeadlineError(ProtocolError):
    """A deadline of a manifest or spec is shorter than the work it must hold."""
