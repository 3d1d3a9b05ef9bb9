"""Typed errors of the challenge service, each carrying its HTTP status and a short code.

Routes never build error bodies by hand: they raise one of these and the app's
exception handler answers ``{"error": code, "detail": message}`` with ``status``.
"""

from __future__ import annotations


class ChallengeError(ValueError):
    """Base class: a request or configuration the challenge service refuses."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.detail = message
        if code is not None:
            self.code = code


class SettingsError(ChallengeError):
    """The service configuration (environment, token or key files) is unusable."""

    code = "bad_settings"


class AuthError(ChallengeError):
    status = 401
    code = "unauthorized"


class ForbiddenError(ChallengeError):
    status = 403
    code = "forbidden"


class NotFoundError(ChallengeError):
    status = 404
    code = "not_found"


class ConflictError(ChallengeError):
    """A duplicate: the thing already exists or was already accepted."""

    status = 409
    code = "conflict"


class PhaseError(ChallengeError):
    """A message that is late, early or otherwise out of the round's current phase."""

    status = 409
    code = "wrong_phase"


class AdmissionError(ChallengeError):
    """A join request that the admission checks refuse."""

    status = 403
    code = "not_admitted"


class MissingRecordError(ChallengeError):
    """A record the question presumes is not stored (a round's merge tape before it
    arrived): a failure, never read as a default such as 0."""

    status = 409
    code = "missing_record"


class UnavailableError(ChallengeError):
    """The service cannot answer now (no metagraph yet, no beacon yet, not configured)."""

    status = 503
    code = "unavailable"


class BondMissingError(ChallengeError):
    """The ledger holds no bond for a decided dispute: nothing can be returned or burned.

    Recorded on the dispute as bond state ``missing`` (never as returned or burned).
    """

    status = 409
    code = "no_bond"


class MetagraphError(ChallengeError):
    """A metagraph snapshot could not be fetched or is malformed."""

    status = 503
    code = "metagraph_unavailable"


class LedgerFaultError(ChallengeError):
    """The ledger failed to answer (a journal or storage fault): never read as a zero.

    A bond, a balance or a roster built on a failed read would be silently wrong, so the
    request fails loudly instead and the fault is logged.
    """

    status = 503
    code = "ledger_error"
