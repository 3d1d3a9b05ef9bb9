"""Verified beacons: a round, its signature and the randomness derived from it.

:func:`verify_beacon` is the one gate every beacon passes, whether it came from a
drand relay, the local devnet beacon or the command line: strict decoding (see
:mod:`hypertrain.beacon.bls`), the pairing check for the pinned chain's key, then
``randomness = SHA-256(signature)``. A published ``randomness`` field is never
trusted; it must equal the recomputed value or the answer is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from hypertrain.beacon.bls import randomness_of, verify_round_signature
from hypertrain.beacon.chain import ChainInfo
from hypertrain.beacon.errors import ForgedSignatureError, MalformedError, WrongRoundError
from hypertrain.protocol.canonical import parse_json
from hypertrain.protocol.errors import CanonicalJSONError

MAX_BEACON_BYTES: Final = 16 * 1024
_HEX: Final = re.compile(r"[0-9a-fA-F]*")


@dataclass(frozen=True, slots=True)
class Beacon:
    """A verified beacon. Build one with :func:`verify_beacon`, not by hand."""

    round: int
    signature: bytes
    randomness: bytes

    def to_json(self) -> dict[str, Any]:
        """drand's ``/public/{round}`` document (unchained scheme)."""
        return {
            "round": self.round,
            "randomness": self.randomness.hex(),
            "signature": self.signature.hex(),
        }


def parse_hex(value: object, what: str) -> bytes:
    """Bytes from an untrusted hex string (either case, no whitespace, even length)."""
    if not isinstance(value, str) or not _HEX.fullmatch(value) or len(value) % 2:
        raise MalformedError(f"{what} must be an even-length hex string")
    return bytes.fromhex(value)


def verify_beacon(chain: ChainInfo, round_number: int, signature: bytes) -> bytes:
    """Verify ``signature`` for ``round_number`` on ``chain``; return the 32-byte randomness.

    Raises a :class:`~hypertrain.beacon.errors.BeaconError` subclass that says why:
    ``malformed``, ``non_canonical``, ``identity_point``, ``not_in_subgroup`` or ``forged``.
    """
    if isinstance(round_number, bool) or not isinstance(round_number, int) or round_number < 1:
        raise MalformedError(f"round {round_number!r} is not a positive integer")
    return verify_round_signature(chain.public_key_point, round_number, signature)


def verified(chain: ChainInfo, round_number: int, signature: bytes) -> Beacon:
    """A :class:`Beacon` after :func:`verify_beacon` accepted it."""
    randomness = verify_beacon(chain, round_number, signature)
    return Beacon(round=round_number, signature=bytes(signature), randomness=randomness)


def beacon_from_json(
    chain: ChainInfo, raw: bytes | dict[str, Any], *, expected_round: int | None = None
) -> Beacon:
    """Parse and verify drand's ``/public/...`` JSON answer.

    With ``expected_round`` an answer for any other round is refused before the
    (costly) signature check, with :class:`WrongRoundError`.
    """
    try:
        doc = raw if isinstance(raw, dict) else parse_json(raw, max_bytes=MAX_BEACON_BYTES)
    except CanonicalJSONError as exc:
        raise MalformedError(f"beacon answer is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise MalformedError("beacon answer must be a JSON object")
    round_number = doc.get("round")
    if isinstance(round_number, bool) or not isinstance(round_number, int) or round_number < 1:
        raise MalformedError(f"beacon answer has no positive integer 'round' ({round_number!r})")
    if expected_round is not None and round_number != expected_round:
        raise WrongRoundError(f"asked for round {expected_round}, the answer is for {round_number}")
    signature = parse_hex(doc.get("signature"), "field 'signature'")
    beacon = verified(chain, round_number, signature)
    if "randomness" in doc and parse_hex(doc["randomness"], "randomness") != beacon.randomness:
        raise ForgedSignatureError(
            f"published randomness for round {round_number} is not SHA-256 of the signature"
        )
    return beacon


__all__ = ["Beacon", "beacon_from_json", "randomness_of", "verified", "verify_beacon"]
