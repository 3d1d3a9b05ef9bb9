"""The journal entry: its canonical body, its hash, and the per-run hash chain.

Every mutation of a run's ledger is one entry. The body is canonical JSON (RFC 8785)
holding the sequence number, the previous entry's hash, the kind, the natural key
``(run, kind, point, hotkey)``, the amount, the epoch, kind-specific detail and the
reason. The entry hash is ``tagged_hash(JOURNAL_ENTRY, body)``; the first entry of a
run links to :data:`GENESIS`. The stored (and exported) bytes are the body itself, so
anyone can recompute every hash from an export alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from hypertrain.ledger.errors import JournalError
from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.domains import JOURNAL_ENTRY, tagged_hash

JOURNAL_VERSION: Final = 1
GENESIS: Final = "0" * 64
MAX_AMOUNT: Final = 2**53 - 1

Kind = Literal[
    "open_run",  # point 0: the run's configuration
    "mint",  # point = round: the round's pool enters the ledger
    "escrow",  # point = round: one miner's share goes into escrow
    "burn_unallocated",  # point = round: the part of the pool nobody could receive
    "vest",  # point = round whose settlement advanced the clock: escrow -> vested
    "fault",  # point = faulty round: burn all unpaid value of a miner in the run
    "deregister",  # point = epoch: the hotkey left the subnet; burn its unpaid value
    "pay",  # point = epoch: vested -> paid by the first get_weights answer
    "epoch",  # point = epoch: the run's nominal release (full share mass) this epoch
    "release",  # point = round: a held escrow's hold ends; it vests from the next settlement
    "bond_lock",  # point = bond number: a dispute locks part of the miner's escrow
    "bond_burn",  # point = bond number: the dispute was lost; the locked part burns
    "bond_return",  # point = bond number: the dispute was won; the lock ends, vesting resumes
]
KINDS: Final[frozenset[str]] = frozenset(get_args(Kind))
FIELDS: Final = frozenset(
    {"v", "run", "seq", "prev", "kind", "point", "hotkey", "amount", "epoch", "detail", "reason"}
)


@dataclass(frozen=True, slots=True)
class Entry:
    """One journal entry, decoded. ``body`` is the exact hashed bytes."""

    run: str
    seq: int
    prev: str
    kind: str
    point: int
    hotkey: str
    amount: int
    epoch: int
    detail: dict[str, Any]
    reason: str
    body: bytes
    hash: str

    @property
    def key(self) -> tuple[str, str, int, str]:
        """The natural key; each is applied at most once per ledger."""
        return (self.run, self.kind, self.point, self.hotkey)


def entry_hash(body: bytes) -> str:
    return tagged_hash(JOURNAL_ENTRY, body).hex()


def make_entry(
    *,
    run: str,
    seq: int,
    prev: str,
    kind: Kind,
    point: int,
    hotkey: str = "",
    amount: int = 0,
    epoch: int = 0,
    detail: dict[str, Any] | None = None,
    reason: str = "",
) -> Entry:
    """Build and hash a new entry (the caller supplies the chain position)."""
    fields: dict[str, Any] = {
        "v": JOURNAL_VERSION,
        "run": run,
        "seq": seq,
        "prev": prev,
        "kind": kind,
        "point": point,
        "hotkey": hotkey,
        "amount": amount,
        "epoch": epoch,
        "detail": detail or {},
        "reason": reason,
    }
    body = canonical_bytes(fields)
    return Entry(
        run, seq, prev, kind, point, hotkey, amount, epoch, fields["detail"], reason, body,
        entry_hash(body),
    )  # fmt: skip


def decode_entry(body: bytes) -> Entry:
    """Parse stored or exported entry bytes, refusing anything malformed.

    Entries are written by :func:`canonical_bytes`; reading them back only needs a strict
    subset check (unique keys, no floats or NaN), the hash chain covers the exact bytes.
    """
    try:
        doc = json.loads(
            body,
            object_pairs_hook=_unique_object,
            parse_float=_refuse_number,
            parse_constant=_refuse_number,
        )
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
        raise JournalError(f"entry is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict) or set(doc) != FIELDS:
        raise JournalError("entry does not have exactly the journal fields")
    if doc["v"] != JOURNAL_VERSION or doc["kind"] not in KINDS:
        raise JournalError(f"unknown entry version or kind {doc.get('kind')!r}")
    for name in ("seq", "point", "amount", "epoch"):
        value = doc[name]
        if type(value) is not int or value < 0:
            raise JournalError(f"entry field {name} is not a non-negative integer")
    for name in ("run", "prev", "hotkey", "reason"):
        if not isinstance(doc[name], str):
            raise JournalError(f"entry field {name} is not a string")
    if not isinstance(doc["detail"], dict):
        raise JournalError("entry detail is not an object")
    return Entry(
        doc["run"], doc["seq"], doc["prev"], doc["kind"], doc["point"], doc["hotkey"],
        doc["amount"], doc["epoch"], doc["detail"], doc["reason"], bytes(body),
        entry_hash(body),
    )  # fmt: skip


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise JournalError("entry has a duplicate object key")
    return out


def _refuse_number(text: str) -> Any:
    raise JournalError(f"entry holds a non-integer number {text}; the ledger has no floats")
