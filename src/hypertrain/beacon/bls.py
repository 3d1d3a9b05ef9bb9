"""BLS12-381 in drand's ``bls-unchained-g1-rfc9380`` scheme, strictly decoded.

Signatures live on G1 (48-byte compressed), public keys on G2 (96-byte compressed).
The signed message for round ``r`` is ``SHA-256(u64_be(r))``, hashed to G1 with the
RFC 9380 suite and :data:`DST`. Verification is one two-pair product check,
``e(sig, -g2) * e(H(m), pk) == 1``; the pairing code is py-arkworks-bls12381's.

Decoding is stricter than the library: a point must be the unique canonical
compressed encoding (re-encoding it gives the same bytes), must not be the identity,
and must lie in the prime-order subgroup. Without those checks a relay could offer
several byte strings for one valid signature and so grind ``SHA-256(signature)``.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Final

from py_arkworks_bls12381 import GT, G1Point, G2Point, Scalar

from hypertrain.beacon.errors import (
    ForgedSignatureError,
    IdentityPointError,
    MalformedError,
    NonCanonicalError,
    SubgroupError,
)

SCHEME_ID: Final = "bls-unchained-g1-rfc9380"
DST: Final = b"BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_"
SIGNATURE_SIZE: Final = 48
PUBLIC_KEY_SIZE: Final = 96
SECRET_KEY_SIZE: Final = 32

_NEG_G2: Final = -G2Point()


def round_message(round_number: int) -> bytes:
    """The 32 bytes drand signs for a round: ``SHA-256(u64_be(round))``."""
    if not 0 <= round_number < 2**64:
        raise MalformedError(f"round {round_number} does not fit in an unsigned 64-bit integer")
    return hashlib.sha256(round_number.to_bytes(8, "big")).digest()


def randomness_of(signature: bytes) -> bytes:
    """The beacon's randomness: ``SHA-256(signature bytes)``."""
    return hashlib.sha256(signature).digest()


def decode_signature(raw: bytes) -> G1Point:
    """A G1 signature point from its canonical compressed bytes, or a typed error."""
    point: G1Point = _decode_point(G1Point, raw, SIGNATURE_SIZE, "signature")
    return point


def decode_public_key(raw: bytes) -> G2Point:
    """A G2 public key from its canonical compressed bytes, or a typed error."""
    point: G2Point = _decode_point(G2Point, raw, PUBLIC_KEY_SIZE, "public key")
    return point


def _decode_point(cls: Any, raw: bytes, size: int, what: str) -> Any:
    """Length, curve, canonical form, identity, then subgroup, each with its own error."""
    if len(raw) != size:
        raise MalformedError(f"{what} is {len(raw)} bytes, expected {size}")
    try:
        unchecked = cls.from_compressed_bytes_unchecked(raw)
    except ValueError as exc:
        raise MalformedError(f"{what} is not a compressed curve point: {exc}") from exc
    if bytes(unchecked.to_compressed_bytes()) != raw:
        raise NonCanonicalError(
            f"{what} bytes are not the canonical compressed encoding of the point they decode to"
        )
    if unchecked == cls.identity():
        raise IdentityPointError(f"{what} is the point at infinity")
    try:
        return cls.from_compressed_bytes(raw)
    except ValueError as exc:
        raise SubgroupError(f"{what} is not in the prime-order subgroup: {exc}") from exc


def verify_round_signature(public_key: G2Point, round_number: int, signature: bytes) -> bytes:
    """Check ``signature`` for ``round_number`` under ``public_key``; return the randomness."""
    point = decode_signature(signature)
    hashed = G1Point.hash_to_curve(round_message(round_number), DST)
    if not GT.pairing_check([point, hashed], [_NEG_G2, public_key]):
        raise ForgedSignatureError(f"signature does not verify for round {round_number}")
    return randomness_of(signature)


def generate_secret_key() -> bytes:
    """A fresh secret scalar (32 bytes big-endian, never zero) from the OS RNG."""
    while True:
        scalar = Scalar.from_be_bytes_mod_order(os.urandom(64))
        if not scalar.is_zero():
            return bytes(scalar.to_be_bytes())


def _scalar(secret_key: bytes) -> Scalar:
    if len(secret_key) != SECRET_KEY_SIZE:
        raise MalformedError(f"secret key is {len(secret_key)} bytes, expected {SECRET_KEY_SIZE}")
    try:
        scalar = Scalar.from_be_bytes(secret_key)
    except ValueError as exc:
        raise MalformedError(f"secret key is not a canonical scalar: {exc}") from exc
    if scalar.is_zero():
        raise MalformedError("secret key is zero")
    return scalar


def public_key_of(secret_key: bytes) -> bytes:
    """The compressed G2 public key ``sk * g2`` for a secret key."""
    return bytes((G2Point() * _scalar(secret_key)).to_compressed_bytes())


def sign_round(secret_key: bytes, round_number: int) -> bytes:
    """The compressed G1 signature ``sk * H(SHA-256(u64_be(round)))``."""
    hashed = G1Point.hash_to_curve(round_message(round_number), DST)
    return bytes((hashed * _scalar(secret_key)).to_compressed_bytes())
