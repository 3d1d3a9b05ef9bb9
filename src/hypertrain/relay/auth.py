"""Upload authorisation: a signed ``blob-put`` envelope in the ``Authorization`` header.

The header is ``Authorization: Envelope <base64url(canonical envelope JSON)>`` (padding
optional). One request carries both the authorisation and the bytes, so an upload is a
single idempotent PUT; a client that retries signs a fresh envelope (new nonce), because
each envelope is accepted once. The checks, in order: header shape, envelope signature,
domain, run, expiry and registration (:func:`open_envelope`), a bounded lifetime, the
:class:`BlobPut` body, that the body names the hash in the URL, the per-blob size limit,
and finally the replay store, so a refused envelope does not burn its nonce.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from pydantic import ValidationError

from hypertrain.protocol.envelope import Envelope, VerifiedEnvelope, decode_envelope, open_envelope
from hypertrain.protocol.errors import EnvelopeError
from hypertrain.protocol.messages import BlobPut
from hypertrain.protocol.replay import ReplayStore
from hypertrain.relay.errors import QuotaError, RelayError

BLOB_PUT_DOMAIN: Final = "blob-put"
SCHEME: Final = "Envelope"
MAX_HEADER_CHARS: Final = 16 * 1024

_STATUS: Final = {
    "wrong_run": 403,
    "unknown_signer": 403,
    "expired": 401,
    "bad_signature": 401,
    "replayed": 409,
}


def encode_authorization(envelope: Envelope) -> str:
    """The ``Authorization`` header value carrying ``envelope``."""
    token = base64.urlsafe_b64encode(envelope.to_bytes()).rstrip(b"=").decode("ascii")
    return f"{SCHEME} {token}"


def decode_authorization(header: str | None) -> Envelope:
    """Parse an ``Authorization: Envelope ...`` header (not yet verified)."""
    if not header:
        raise RelayError("missing_authorisation", "PUT needs 'Authorization: Envelope ...'", 401)
    if len(header) > MAX_HEADER_CHARS:
        raise RelayError("malformed", f"Authorization header over {MAX_HEADER_CHARS} chars", 400)
    scheme, _, token = header.strip().partition(" ")
    if scheme != SCHEME or not token:
        raise RelayError("missing_authorisation", f"Authorization scheme must be {SCHEME}", 401)
    token = token.strip()
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError) as exc:
        raise RelayError("malformed", "Authorization token is not base64url", 400) from exc
    try:
        return decode_envelope(raw)
    except EnvelopeError as exc:
        raise _from_envelope_error(exc) from exc


def _from_envelope_error(exc: EnvelopeError) -> RelayError:
    return RelayError(exc.reason, exc.detail, _STATUS.get(exc.reason, 400))


@dataclass(frozen=True, slots=True)
class UploadPolicy:
    """The limits an upload envelope is checked against."""

    run_ids: frozenset[str]  # empty: any run
    max_blob_bytes: int
    max_lifetime_rounds: int


@dataclass(frozen=True, slots=True)
class Authorised:
    """A verified upload authorisation."""

    envelope: VerifiedEnvelope
    put: BlobPut
    header: str

    @property
    def signer(self) -> str:
        return self.envelope.signer


def authorise_put(
    header: str | None,
    sha256: str,
    *,
    policy: UploadPolicy,
    current_round: int,
    is_registered: Callable[[str], bool],
    replay: ReplayStore,
) -> Authorised:
    """Verify an upload's authorisation for blob ``sha256``; raises :class:`RelayError`."""
    env = decode_authorization(header)
    try:
        verified = open_envelope(
            env,
            domain=BLOB_PUT_DOMAIN,
            run_id=None,
            current_round=current_round,
            is_registered=is_registered,
        )
    except EnvelopeError as exc:
        raise _from_envelope_error(exc) from exc
    if policy.run_ids and env.run_id not in policy.run_ids:
        raise RelayError(
            "wrong_run",
            f"the envelope is for {env.run_id!r}; this relay serves"
            f" {', '.join(sorted(policy.run_ids))} (start it with one --run-id per run or"
            " competition, or none to serve every run)",
            403,
        )
    if env.expiry_round > current_round + policy.max_lifetime_rounds:
        raise RelayError(
            "expiry_too_far",
            f"expiry round {env.expiry_round} is more than {policy.max_lifetime_rounds}"
            f" rounds after the current round {current_round}",
            401,
        )
    put = _blob_put(env)
    if put.sha256 != sha256:
        raise RelayError(
            "hash_not_authorised", f"envelope authorises {put.sha256}, not {sha256}", 400
        )
    if put.size > policy.max_blob_bytes:
        raise QuotaError(
            "blob_too_large", f"blob is {put.size} bytes, limit is {policy.max_blob_bytes}"
        )
    try:
        replay.record(env.signer, env.nonce, env.expiry_round)
    except EnvelopeError as exc:
        raise _from_envelope_error(exc) from exc
    return Authorised(verified, put, header or "")


def _blob_put(env: Envelope) -> BlobPut:
    try:
        return BlobPut.model_validate(env.body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise RelayError("bad_body", f"blob-put body {where}: {first['msg']}", 400) from exc
