"""Typed errors for everything the beacon layer refuses.

Every refusal is a :class:`BeaconError` (a ``ValueError``) carrying a short
machine-readable ``reason`` and a message a person can act on. The client logs the
reason when it falls back to another endpoint; the CLI prints it.
"""

from __future__ import annotations


class BeaconError(ValueError):
    """Base class: a beacon, signature, chain description or endpoint answer is refused."""

    reason = "beacon_error"

    def __init__(self, message: str) -> None:
        super().__init__(f"{self.reason}: {message}")
        self.detail = message


class MalformedError(BeaconError):
    """Bytes or JSON that do not even parse: bad hex, wrong length, truncated document."""

    reason = "malformed"


class NonCanonicalError(BeaconError):
    """A point encoding that decodes but is not the unique canonical compressed form."""

    reason = "non_canonical"


class IdentityPointError(BeaconError):
    """The point at infinity, which is never a valid signature or public key."""

    reason = "identity_point"


class SubgroupError(BeaconError):
    """A point that is not on the curve or not in the prime-order subgroup."""

    reason = "not_in_subgroup"


class ForgedSignatureError(BeaconError):
    """A well-formed signature that does not verify for this chain and round."""

    reason = "forged"


class ChainInfoError(BeaconError):
    """A chain description is malformed, inconsistent with its hash, or of another scheme."""

    reason = "bad_chain_info"


class ChainMismatchError(BeaconError):
    """An endpoint serves a different chain than the one pinned."""

    reason = "wrong_chain"


class WrongRoundError(BeaconError):
    """An endpoint answered with a different round than the one asked for."""

    reason = "wrong_round"


class FutureRoundError(BeaconError):
    """A round whose publication time has not come yet (by the local clock plus skew)."""

    reason = "future_round"


class EndpointError(BeaconError):
    """An endpoint failed at the transport level: dead, slow, or an HTTP error status."""

    reason = "endpoint_failed"


class RoundNotAvailableError(BeaconError):
    """Every endpoint that answered said the round has not been produced yet."""

    reason = "not_available"


class BeaconUnavailableError(BeaconError):
    """No endpoint produced a verified answer after all retries."""

    reason = "unavailable"


class BeaconTimeoutError(BeaconError):
    """``wait_for`` gave up before the round became available."""

    reason = "timeout"


class LocalKeyError(BeaconError):
    """The local beacon's key file or state directory is unusable."""

    reason = "bad_local_key"
