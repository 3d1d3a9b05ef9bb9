"""Typed errors for everything the ledger refuses.

Every refusal is a :class:`LedgerError` (a ``ValueError``), so the top-level CLI and the
challenge service report it as bad input rather than as a crash.
"""

from __future__ import annotations


class LedgerError(ValueError):
    """Base class: an operation or a journal that the ledger refuses."""


class InvalidAmountError(LedgerError):
    """An amount, token count, round or epoch is negative, non-integer or too large."""


class InvalidHotkeyError(LedgerError):
    """A hotkey is not a valid SS58 address."""


class UnknownRunError(LedgerError):
    """The run id has never been created in this ledger."""


class UnknownHotkeyError(LedgerError):
    """The hotkey has no history in the run (or in any run, for deregistration)."""


class InvalidHoldError(LedgerError):
    """A probation hold names a hotkey without a reward, or a release not after the round."""


class RoundNotFinalError(LedgerError):
    """A fault names a round that has not been settled (made final) yet."""


class LedgerConflictError(LedgerError):
    """An operation repeats a natural key with different inputs (e.g. settling twice)."""


class EpochError(LedgerError):
    """A get_weights call names an epoch that precedes one already answered."""


class JournalError(LedgerError):
    """A journal (in the database or an export) is malformed, broken or edited."""


class LedgerStorageError(LedgerError):
    """The database file is unusable: newer schema than this code, or not a ledger."""


class BondError(LedgerError):
    """A dispute bond the ledger refuses: too little unlocked escrow, or no such bond."""
