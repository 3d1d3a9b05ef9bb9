"""Production wiring: the drand beacon client, the integer ledger, the metagraph provider.

Kept apart from the app factory so tests inject their own parts and the optional
chain provider is only imported when chosen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypertrain.challenge.metagraph import (
    ChainMetagraph,
    FileMetagraph,
    MasterMetagraph,
    MetagraphProvider,
)
from hypertrain.challenge.ports import BeaconRound, BeaconSource, LedgerPort, WeightsAnswer
from hypertrain.challenge.settings import Settings


class DrandBeacon:
    """:class:`BeaconSource` over :class:`hypertrain.beacon.BeaconClient` (verified rounds)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def latest(self) -> BeaconRound:
        return _round(self._client.latest())

    def get(self, round_number: int) -> BeaconRound:
        return _round(self._client.get(round_number))


def _round(beacon: Any) -> BeaconRound:
    return BeaconRound(int(beacon.round), beacon.randomness.hex(), beacon.signature.hex())


def beacon_source(settings: Settings) -> BeaconSource:
    from hypertrain.beacon import QUICKNET, BeaconClient, load_chain_info

    chain = load_chain_info(settings.beacon_info_file) if settings.beacon_info_file else QUICKNET
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    client = BeaconClient(settings.beacon_urls, chain, settings.state_dir / "beacon-cache.sqlite")
    return DrandBeacon(client)


class LedgerAdapter:
    """:class:`LedgerPort` over :class:`hypertrain.ledger.Ledger`."""

    def __init__(self, ledger: Any) -> None:
        self._ledger = ledger

    def create_run(self, run_id: str, *, pool_per_round: int, vesting_rounds: int) -> None:
        self._ledger.create_run(
            run_id, pool_per_round=pool_per_round, vesting_rounds=vesting_rounds
        )

    def settle_round(
        self, run_id: str, round_index: int, accepted: Mapping[str, int], epoch: int
    ) -> None:
        self._ledger.settle_round(run_id, round_index, dict(accepted), epoch)

    def record_fault(self, run_id: str, round_index: int, hotkey: str, reason: str) -> None:
        self._ledger.record_fault(run_id, round_index, hotkey, reason)

    def get_weights(self, epoch: int, registered: Mapping[str, int]) -> WeightsAnswer:
        answer = self._ledger.get_weights(epoch, set(registered))
        return WeightsAnswer(
            dict(answer.weights),
            answer.full_share_mass,
            {"ledger_answer_sha256": getattr(answer, "sha256", "")},
        )

    def balances(self, run_id: str) -> dict[str, dict[str, int]]:
        summary = self._ledger.summary(run_id)
        out: dict[str, dict[str, int]] = {}
        for hotkey, bal in getattr(summary, "balances", {}).items():
            out[hotkey] = {
                "escrow": int(getattr(bal, "escrow", 0)),
                "vested": int(getattr(bal, "vested", 0)),
                "burned": int(getattr(bal, "burned", 0)),
            }
        return out


def ledger(settings: Settings) -> LedgerPort:
    import hypertrain.ledger as ledger_pkg

    settings.state_dir.mkdir(parents=True, exist_ok=True)
    instance = ledger_pkg.Ledger(settings.state_dir / "ledger.sqlite")
    return LedgerAdapter(instance)


def metagraph_provider(settings: Settings) -> MetagraphProvider:
    if settings.metagraph_source == "file":
        assert settings.metagraph_file is not None
        return FileMetagraph(settings.metagraph_file, settings.netuid)
    if settings.metagraph_source == "chain":
        return ChainMetagraph(settings.chain_network, settings.netuid)
    assert settings.master_url is not None
    return MasterMetagraph(settings.master_url, settings.netuid)
