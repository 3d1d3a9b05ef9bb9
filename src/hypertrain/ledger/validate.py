"""Input checks shared by every ledger operation: integers, hotkeys, run ids.

Amounts, rounds and epochs must be plain ``int`` (``bool`` and ``float`` are refused,
even ``3.0``), non-negative and inside the I-JSON range, so every value the ledger
stores can be written to canonical JSON unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from hypertrain.ledger.errors import (
    BondError,
    InvalidAmountError,
    InvalidHoldError,
    InvalidHotkeyError,
    UnknownRunError,
)
from hypertrain.ledger.journal import MAX_AMOUNT
from hypertrain.protocol.errors import IdentityError
from hypertrain.protocol.identity import ss58_decode

_RUN_ID: Final = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def check_int(value: Any, name: str, *, minimum: int = 0) -> int:
    """``value`` as an int in ``[minimum, 2**53 - 1]``, or :class:`InvalidAmountError`."""
    if type(value) is not int:
        raise InvalidAmountError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise InvalidAmountError(f"{name} must be >= {minimum}, got {value}")
    if value > MAX_AMOUNT:
        raise InvalidAmountError(f"{name} {value} exceeds the ledger maximum 2**53-1")
    return value


def check_hotkey(value: Any) -> str:
    """A valid SS58 address (any one-byte network prefix)."""
    try:
        ss58_decode(value, None)
    except IdentityError as exc:
        raise InvalidHotkeyError(f"invalid hotkey: {exc}") from exc
    return str(value)


def check_run_id(value: Any) -> str:
    if not isinstance(value, str) or not _RUN_ID.match(value):
        raise UnknownRunError(f"run id {value!r:.80} is not a valid run id")
    return value


def check_holds(held: Any, accepted: Mapping[str, int], round_: int) -> dict[str, int]:
    """Probation holds: each names an accepted hotkey and a release round after ``round_``."""
    if not isinstance(held, Mapping):
        raise InvalidHoldError("held must map hotkeys to the round their probation ends")
    out: dict[str, int] = {}
    for hotkey, release in held.items():
        check_hotkey(hotkey)
        check_int(release, f"probation end of {hotkey}")
        if hotkey not in accepted:
            raise InvalidHoldError(f"hold for {hotkey}, which has no reward in round {round_}")
        if release <= round_:
            raise InvalidHoldError(
                f"hold for {hotkey} ends at round {release}, not after round {round_}"
            )
        out[str(hotkey)] = release
    return out


_DISPUTE: Final = re.compile(r"^[0-9a-f]{64}$")


def check_dispute(value: Any) -> str:
    """A dispute id: 64 lowercase hex digits (the SHA-256 of its opening envelope)."""
    if not isinstance(value, str) or not _DISPUTE.match(value):
        raise BondError(f"dispute id {value!r:.80} is not 64 hex digits")
    return value
