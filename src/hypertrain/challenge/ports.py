"""The two outside parts the service is driven by, as small interfaces.

:class:`BeaconSource` is the only clock: the latest *verified* drand round and the
randomness of any past round. :class:`LedgerPort` is the integer ledger that
settles rounds and answers weights. Production wiring (``wiring.py``) plugs in
``hypertrain.beacon`` and ``hypertrain.ledger``; both are synchronous, so the
service calls them from a worker thread. :class:`Books` bundles what settlement books
with (the database, the ledger, the metagraph's epoch, the witness settings, the clock).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from hypertrain.challenge.metagraph import MetagraphView
from hypertrain.challenge.settings import Settings

# The beacon round due now by the service's own clock (``ServiceState.due_round``), for
# a function that reads it only where it checks a deadline: one with nothing to check
# (a round without a tape) answers without a verified beacon round.
DueRound = Callable[[], int]


@dataclass(frozen=True, slots=True)
class BeaconRound:
    """A verified drand round: number, randomness and signature (hex)."""

    round: int
    randomness: str
    signature: str


class BeaconSource(Protocol):
    def latest(self) -> BeaconRound:
        """The newest round whose signature verified."""
        ...

    def get(self, round_number: int) -> BeaconRound:
        """A specific verified round (raises ``ValueError`` when it does not exist yet)."""
        ...


@dataclass(frozen=True, slots=True)
class WeightsAnswer:
    weights: dict[str, int | float]
    full_share_mass: int | float
    ledger_answer_sha256: str | None = None  # the ledger's own hash of its answer


class LedgerPort(Protocol):
    def create_run(self, run_id: str, *, pool_per_round: int, vesting_rounds: int) -> None: ...

    def settle_round(
        self,
        run_id: str,
        round_index: int,
        accepted: Mapping[str, int],
        epoch: int,
        held: Mapping[str, int] | None = None,
    ) -> None:
        """Escrow the round's pool; ``held`` maps probation islands to their release round."""
        ...

    def record_fault(
        self, run_id: str, round_index: int, hotkey: str, reason: str, epoch: int
    ) -> int:
        """Burn the hotkey's unpaid value in the run; the round must already be settled."""
        ...

    def get_weights(self, epoch: int, registered: Collection[str]) -> WeightsAnswer: ...

    def release_hold(
        self, run_id: str, round_index: int, hotkey: str, epoch: int, until: int = 0
    ) -> bool:
        """End a hold that waited for a verdict: the escrow vests from the next settlement."""
        ...

    def deregister(self, hotkey: str, epoch: int) -> int:
        """Burn the hotkey's unpaid value in every run (it left the subnet); 0 if none."""
        ...

    def lock_bond(self, run_id: str, hotkey: str, dispute_id: str, amount: int, epoch: int) -> int:
        """Lock a dispute's bond from the island's unvested escrow (its own journal entry).

        Idempotent per dispute; refuses (``no_bond``) an island with too little escrow.
        """
        ...

    def free_escrow(self, run_id: str, hotkey: str) -> int:
        """The island's escrow a new bond could lock (neither vested nor locked); 0 if none.

        A ledger that cannot answer raises (``LedgerFaultError``), never answers 0.
        """
        ...

    def settle_bond(self, run_id: str, dispute_id: str, won: bool, epoch: int) -> int:
        """Return the bond (dispute won) or burn it (lost); 0 on a repeat.

        Raises :class:`~hypertrain.challenge.errors.BondMissingError` when the ledger
        holds no bond for the dispute (the service records the bond as ``missing``).
        """
        ...

    def balances(self, run_id: str, hotkeys: list[str]) -> dict[str, dict[str, int]]:
        """hotkey -> {"escrow", "held", "vested", "paid", "burned"} in integer base units.

        ``held`` is the part of ``escrow`` waiting for the island's probation to end. A
        hotkey with no history in the run is left out; a ledger that cannot answer raises
        (``LedgerFaultError``), never answers zeros.
        """
        ...


@dataclass(frozen=True, slots=True)
class Books:
    """What deciding a final round's rewards again and booking the result takes
    (settlement, and every path that changes a standing verdict): the database, the
    ledger at the metagraph's epoch, the witness settings and the service's clock
    (``ServiceState.books``)."""

    conn: sqlite3.Connection
    ledger: LedgerPort
    metagraph: MetagraphView
    settings: Settings
    due_round: DueRound
