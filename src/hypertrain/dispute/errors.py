"""Typed refusals of dispute messages; each names a stable ``code`` for the wire."""

from __future__ import annotations


class DisputeError(ValueError):
    """A dispute message that the game refuses; the game state is unchanged."""

    code = "bad_dispute"


class NotAPartyError(DisputeError):
    code = "not_a_party"


class WrongQueryError(DisputeError):
    """An answer for another query, level, segment, step or layer than the one asked."""

    code = "wrong_query"


class WrongCountError(DisputeError):
    """An answer with the wrong number of hashes or entries."""

    code = "wrong_count"


class WrongAnswerError(DisputeError):
    """An answer that contradicts what the party already committed to."""

    code = "contradiction"


class DuplicateAnswerError(DisputeError):
    code = "duplicate"


class LateAnswerError(DisputeError):
    code = "late"


class DecidedError(DisputeError):
    code = "decided"


class InputMismatchError(DisputeError):
    """Operation inputs whose bytes do not hash to the agreed input hashes."""

    code = "input_mismatch"


class UnknownRefereeError(DisputeError):
    code = "unknown_referee"


class InadmissibleError(DisputeError):
    """A dispute of a segment the verdict does not name as the first that differs."""

    code = "not_first_difference"
