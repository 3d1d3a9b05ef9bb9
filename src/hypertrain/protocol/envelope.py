"""Signed envelopes: the one wrapper every network message travels in.

An envelope names its version, domain (the kind of message), run, signer (SS58),
a nonce, an expiry beacon round and a JSON body. The signature is sr25519 over::

    ENVELOPE_SIG || 0x00 || JCS(envelope without "signature")

An :class:`Envelope` holds only what canonical JSON can carry (integers within
+-(2**53 - 1), finite numbers, in its body or anywhere else): anything else is refused as
``non_canonical_json`` when the envelope is built, so no peer-chosen number reaches
signing or hashing unchecked.
Verification (:func:`open_envelope`) returns a :class:`VerifiedEnvelope` or raises
:class:`EnvelopeError` whose ``reason`` says exactly what failed. Replay protection is
a separate component (:mod:`hypertrain.protocol.replay`) so each service picks its store.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from hypertrain.protocol import domains
from hypertrain.protocol.canonical import canonical_bytes, parse_json
from hypertrain.protocol.errors import CanonicalJSONError, EnvelopeError, IdentityError
from hypertrain.protocol.identity import Hotkey, ss58_decode, verify_signature

ENVELOPE_VERSION: Final = 1
MAX_ENVELOPE_BYTES: Final = 1 << 20
# The refusal of a body outside canonical JSON (an integer past +-(2**53 - 1), a
# non-finite number): the validation error type and the EnvelopeError reason.
NON_CANONICAL: Final = "non_canonical_json"
_SIG_PREFIX: Final = domains.tagged_prefix(domains.ENVELOPE_SIG)


class Envelope(BaseModel):
    """The wire form of a signed message."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    version: Literal[1]
    domain: str = Field(pattern=r"^[a-z][a-z0-9_.-]{0,63}$")
    run_id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    signer: str = Field(min_length=40, max_length=60)
    nonce: str = Field(pattern=r"^[A-Za-z0-9_.:-]{8,128}$")
    expiry_round: int = Field(ge=0, le=2**53 - 1)
    body: dict[str, Any]
    signature: str = Field(pattern=r"^[0-9a-f]{128}$")

    @model_validator(mode="before")
    @classmethod
    def _canonical(cls, data: Any) -> Any:
        """A document canonical JSON cannot hold can be neither signed nor hashed."""
        if isinstance(data, dict):
            try:
                canonical_bytes(data)
            except CanonicalJSONError as exc:
                raise PydanticCustomError(NON_CANONICAL, "{reason}", {"reason": str(exc)}) from None
        return data

    def unsigned_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude={"signature"})

    def signing_bytes(self) -> bytes:
        return signing_bytes(self.unsigned_dict())

    def to_bytes(self) -> bytes:
        return canonical_bytes(self.model_dump())

    def content_id(self) -> str:
        """The message's content id (a commit's, a dispute's, a stored envelope's)."""
        return content_id(self.to_bytes())


def content_id(canonical: bytes) -> str:
    """The content id of a signed message: SHA-256 of its canonical bytes, hex."""
    return hashlib.sha256(canonical).hexdigest()


@dataclass(frozen=True, slots=True)
class VerifiedEnvelope:
    """An envelope whose signature, domain, run and expiry were checked."""

    envelope: Envelope
    public_key: bytes

    @property
    def signer(self) -> str:
        return self.envelope.signer

    @property
    def body(self) -> dict[str, Any]:
        return self.envelope.body


def signing_bytes(unsigned: dict[str, Any]) -> bytes:
    """The exact bytes an envelope signature covers."""
    return _SIG_PREFIX + canonical_bytes(unsigned)


def new_nonce() -> str:
    return secrets.token_hex(16)


def seal(
    key: Hotkey,
    *,
    domain: str,
    run_id: str,
    body: dict[str, Any],
    expiry_round: int,
    nonce: str | None = None,
) -> Envelope:
    """Sign ``body`` as an envelope from ``key``."""
    unsigned = {
        "version": ENVELOPE_VERSION,
        "domain": domain,
        "run_id": run_id,
        "signer": key.ss58_address,
        "nonce": nonce or new_nonce(),
        "expiry_round": expiry_round,
        "body": body,
    }
    signature = key.sign(signing_bytes(unsigned)).hex()
    return Envelope.model_validate({**unsigned, "signature": signature})


def decode_envelope(raw: bytes | str | dict[str, Any] | Envelope) -> Envelope:
    """Parse and shape-check an envelope without verifying it."""
    if isinstance(raw, Envelope):
        return raw
    try:
        value = raw if isinstance(raw, dict) else parse_json(raw, max_bytes=MAX_ENVELOPE_BYTES)
    except CanonicalJSONError as exc:
        raise EnvelopeError("malformed", str(exc)) from exc
    if not isinstance(value, dict):
        raise EnvelopeError("malformed", "envelope must be a JSON object")
    version = value.get("version")
    if version is not None and version != ENVELOPE_VERSION:
        raise EnvelopeError("wrong_version", f"envelope version {version!r}, expected 1")
    try:
        return Envelope.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "envelope"
        reason = NON_CANONICAL if first["type"] == NON_CANONICAL else "malformed"
        raise EnvelopeError(reason, f"{where}: {first['msg']}") from exc


def open_envelope(
    raw: bytes | str | dict[str, Any] | Envelope,
    *,
    domain: str,
    run_id: str | None = None,
    current_round: int | None = None,
    is_registered: Callable[[str], bool] | None = None,
) -> VerifiedEnvelope:
    """Verify an envelope; every failure raises :class:`EnvelopeError` with a reason.

    ``run_id=None`` accepts any run; ``current_round`` (the latest verified beacon
    round) enables the expiry check; ``is_registered`` enables the signer check.
    """
    env = raw if isinstance(raw, Envelope) else decode_envelope(raw)
    try:  # an envelope built without validation may still hold a non-canonical body
        signed = env.signing_bytes()
    except CanonicalJSONError as exc:
        raise EnvelopeError(NON_CANONICAL, f"body: {exc}") from None
    if env.domain != domain:
        raise EnvelopeError("wrong_domain", f"envelope is a {env.domain!r}, expected {domain!r}")
    if run_id is not None and env.run_id != run_id:
        raise EnvelopeError("wrong_run", f"envelope is for run {env.run_id!r}, not {run_id!r}")
    if current_round is not None and env.expiry_round < current_round:
        raise EnvelopeError(
            "expired", f"envelope expired at beacon round {env.expiry_round} (now {current_round})"
        )
    try:
        public_key = ss58_decode(env.signer)
    except IdentityError as exc:
        raise EnvelopeError("malformed", f"signer: {exc}") from exc
    if is_registered is not None and not is_registered(env.signer):
        raise EnvelopeError("unknown_signer", f"{env.signer} is not registered on the subnet")
    if not verify_signature(public_key, signed, bytes.fromhex(env.signature)):
        raise EnvelopeError("bad_signature", f"signature does not verify for {env.signer}")
    return VerifiedEnvelope(env, public_key)
