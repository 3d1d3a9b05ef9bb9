"""Production wiring: the drand beacon client, the integer ledger, the metagraph provider.

Kept apart from the app factory so tests inject their own parts and the optional
chain provider is only imported when chosen. A ledger that fails to answer a read is a
typed error (:class:`LedgerFaultError`, 503) and a logged event, never a zero.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Collection, Mapping
from typing import Any

from hypertrain.challenge.errors import (
    BondMissingError,
    ConflictError,
    ForbiddenError,
    LedgerFaultError,
)
from hypertrain.challenge.metagraph import (
    ChainMetagraph,
    FileMetagraph,
    MasterMetagraph,
    MetagraphProvider,
)
from hypertrain.challenge.ports import BeaconRound, BeaconSource, LedgerPort, WeightsAnswer
from hypertrain.challenge.settings import Settings
from hypertrain.ledger import BondError, EpochError, Ledger, LedgerError, UnknownHotkeyError

log = logging.getLogger(__name__)


class DrandBeacon:
    """:class:`BeaconSource` over :class:`hypertrain.beacon.BeaconClient` (verified rounds)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def latest(self) -> BeaconRound:
        return _round(self._client.latest())

    def get(self, round_number: int) -> BeaconRound:
        return _round(self._client.get(round_number))

    def due_round(self) -> int:
        """The round the chain's schedule says exists now (genesis + period), verified or not."""
        return int(self._client.due_round())

    def period_s(self) -> int:
        """Seconds between the chain's rounds."""
        return int(self._client.chain.period_s)


def _round(beacon: Any) -> BeaconRound:
    return BeaconRound(int(beacon.round), beacon.randomness.hex(), beacon.signature.hex())


def beacon_source(settings: Settings) -> BeaconSource:
    from hypertrain.beacon import QUICKNET, BeaconClient, load_chain_info

    chain = load_chain_info(settings.beacon_info_file) if settings.beacon_info_file else QUICKNET
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    client = BeaconClient(settings.beacon_urls, chain, settings.state_dir / "beacon-cache.sqlite")
    return DrandBeacon(client)


class LedgerAdapter:
    """:class:`LedgerPort` over :class:`hypertrain.ledger.Ledger` (integer base units)."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def create_run(self, run_id: str, *, pool_per_round: int, vesting_rounds: int) -> None:
        self._ledger.create_run(run_id, pool_per_round, vesting_rounds)

    def settle_round(
        self,
        run_id: str,
        round_index: int,
        accepted: Mapping[str, int],
        epoch: int,
        held: Mapping[str, int] | None = None,
    ) -> None:
        self._ledger.settle_round(run_id, round_index, accepted, epoch, held=held)

    def record_fault(
        self, run_id: str, round_index: int, hotkey: str, reason: str, epoch: int
    ) -> int:
        try:
            return self._ledger.record_fault(run_id, round_index, hotkey, reason, epoch)
        except UnknownHotkeyError:
            return 0  # a miner faulting in its first round holds nothing to burn

    def release_hold(
        self, run_id: str, round_index: int, hotkey: str, epoch: int, until: int = 0
    ) -> bool:
        return self._ledger.release_hold(run_id, round_index, hotkey, epoch, until)

    def deregister(self, hotkey: str, epoch: int) -> int:
        try:
            return self._ledger.deregister(hotkey, epoch)
        except UnknownHotkeyError:
            return 0  # never earned anything: nothing to burn

    def lock_bond(self, run_id: str, hotkey: str, dispute_id: str, amount: int, epoch: int) -> int:
        try:
            return self._ledger.lock_bond(run_id, hotkey, dispute_id, amount, epoch)
        except (BondError, UnknownHotkeyError) as exc:
            raise ForbiddenError(f"cannot lock the dispute bond: {exc}", code="no_bond") from None

    def free_escrow(self, run_id: str, hotkey: str) -> int:
        """0 for a hotkey without escrow (the ledger's own answer); a fault raises."""
        try:
            return self._ledger.free_escrow(run_id, hotkey)
        except (LedgerError, sqlite3.Error) as exc:
            raise _fault("free_escrow", run_id, exc) from exc

    def settle_bond(self, run_id: str, dispute_id: str, won: bool, epoch: int) -> int:
        try:
            return self._ledger.settle_bond(run_id, dispute_id, won, epoch)
        except BondError as exc:
            raise BondMissingError(f"cannot settle the dispute bond: {exc}") from exc

    def get_weights(self, epoch: int, registered: Collection[str]) -> WeightsAnswer:
        try:
            answer = self._ledger.get_weights(epoch, registered)
        except EpochError as exc:
            raise ConflictError(str(exc), code="epoch_superseded") from None
        return WeightsAnswer(
            dict(answer.weights),
            answer.full_share_mass,
            ledger_answer_sha256=answer.sha256,
        )

    def balances(self, run_id: str, hotkeys: list[str]) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for hotkey in hotkeys:
            try:
                bal = self._ledger.balances(run_id, hotkey)
            except UnknownHotkeyError:
                continue  # no history in the run: nothing to show (not a zero read)
            except (LedgerError, sqlite3.Error) as exc:
                raise _fault("balances", run_id, exc) from exc
            out[hotkey] = {
                "escrow": bal.escrowed,
                "held": bal.held,
                "vested": bal.vested,
                "paid": bal.paid,
                "burned": bal.burned,
            }
        return out


def _fault(operation: str, run_id: str, exc: Exception) -> LedgerFaultError:
    """A ledger read that failed: logged, and raised as a typed 503 (never a zero)."""
    log.error(
        "ledger %s failed: %s", operation, exc,
        extra={"run": run_id, "operation": operation, "error": type(exc).__name__},
    )  # fmt: skip
    return LedgerFaultError(f"the ledger could not answer {operation} for run {run_id!r}: {exc}")


def ledger(settings: Settings) -> LedgerPort:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    return LedgerAdapter(Ledger.in_state_dir(settings.state_dir))


def metagraph_provider(settings: Settings) -> MetagraphProvider:
    if settings.metagraph_source == "file":
        assert settings.metagraph_file is not None
        return FileMetagraph(settings.metagraph_file, settings.netuid)
    if settings.metagraph_source == "chain":
        return ChainMetagraph(settings.chain_network, settings.netuid)
    assert settings.master_url is not None
    return MasterMetagraph(settings.master_url, settings.netuid)
