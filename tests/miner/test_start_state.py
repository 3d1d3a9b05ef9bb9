"""The miner derives exactly the start state the auditor checks, under both policies.

Under ``carry`` it reads its previous final checkpoint from its state directory when
the bytes are the committed ones and from the relay otherwise (a fresh machine), and
both give the auditor's state; under ``reset`` it ignores the previous round.
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hypertrain.evidence.start import PreviousRound, derive_start_state
from hypertrain.evidence.verify import verify_round_open
from hypertrain.miner.config import MinerConfig
from hypertrain.miner.context import RunContext
from hypertrain.miner.errors import MinerError
from hypertrain.miner.report import Reporter
from hypertrain.miner.run import round_inputs, start_state
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.manifest import RunManifest
from hypertrain.relay.errors import RelayError
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.start_state import reset_state
from tests.auditor.islands import MemoryRelay, publish_round
from tests.auditor.world import ISLANDS, World, make_world


def _round_zero(world: World, tmp_path: Path) -> tuple[Any, ...]:
    """Round 0 trained and committed by ISLANDS[0] at a memory relay, rounds 0 and 1 open:
    the relay, the two verified records, the miner's config, the commit, its context and
    round 1's train config."""
    manifest = world.manifest
    relay = MemoryRelay()
    relay.put(world.model_blob)
    roster = [k.ss58_address for k in ISLANDS]
    opens = [
        verify_round_open(world.round_open(w, roster).model_dump(), manifest, w) for w in (0, 1)
    ]
    cfg = MinerConfig(run_id=manifest.run_id, state_dir=str(tmp_path / "state"))
    r0 = publish_round(world, relay, ISLANDS[0], opens[:1], cfg.round_dir(0))
    ctx = RunContext(cfg, _Rounds([r0.envelope]), manifest)  # type: ignore[arg-type]
    return relay, opens, cfg, r0, ctx, TrainConfig.from_manifest(manifest)


@dataclass
class _Detail:
    round: int
    commits: list[Envelope]


class _Rounds:
    """The one read ``start_state`` makes of the service: a round's public commits."""

    def __init__(self, commits: list[Any]) -> None:
        self.commits = [Envelope.model_validate(c) if isinstance(c, dict) else c for c in commits]

    def round_detail(self, run_id: str, index: int) -> _Detail:
        return _Detail(index, self.commits)


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("miner-start"))


def _carry(world: World) -> World:
    inner = world.manifest.inner.model_copy(update={"state_policy": "carry"})
    manifest = RunManifest.model_validate(
        {**world.manifest.model_dump(mode="json"), "inner": inner.model_dump(mode="json")}
    )
    return dataclasses.replace(world, manifest=manifest)


@pytest.mark.parametrize("policy", ["reset", "carry"])
def test_miner_start_state_is_the_auditors(world: World, tmp_path: Path, policy: str) -> None:
    world = _carry(world) if policy == "carry" else world
    manifest, key = world.manifest, ISLANDS[0]
    relay, opens, cfg, r0, ctx, config = _round_zero(world, tmp_path)
    params = r0.start_params
    fetch = lambda sha, limit: relay.get(sha, max_bytes=limit)  # noqa: E731
    expected = derive_start_state(
        manifest, config, 1, params, PreviousRound(r0.commit, lambda: params), fetch
    )
    mine = start_state(ctx, config, opens, params, key.ss58_address, relay)  # type: ignore[arg-type]
    assert mine.state_hash() == expected.state_hash()
    reset = reset_state(config.state_config(), params, config.round_start_step(1))
    assert (mine.state_hash() == reset.state_hash()) == (policy == "reset")
    shutil.rmtree(cfg.round_dir(0))  # a fresh machine: the relay has the committed bytes
    again = start_state(ctx, config, opens, params, key.ss58_address, relay)  # type: ignore[arg-type]
    assert again.state_hash() == expected.state_hash()


def test_a_round_whose_input_the_relay_lost_is_skipped_not_fatal(
    world: World, tmp_path: Path
) -> None:
    """A relay that no longer holds the round's start model (lost, or gone while the island
    was away) makes the round a MinerError, which the follow loop skips, not the end.
    (Round 1: round 0's model of a run without a warm start is computed, not fetched.)"""
    manifest, key = world.manifest, ISLANDS[0]
    roster = [k.ss58_address for k in ISLANDS]
    opens = [verify_round_open(world.round_open(w, roster).model_dump(), manifest, w)
             for w in (0, 1)]  # fmt: skip
    cfg = MinerConfig(run_id=manifest.run_id, state_dir=str(tmp_path / "state"))
    ctx = RunContext(cfg, _Rounds([]), manifest)  # type: ignore[arg-type]
    config = TrainConfig.from_manifest(manifest)
    started: list[bool] = []
    with pytest.raises(MinerError, match="round 1: the relay does not hold its input"):
        round_inputs(ctx, config, opens, key.ss58_address, MemoryRelay(), Reporter("miner"),
                     lambda: started.append(True))  # type: ignore[arg-type]  # fmt: skip
    assert started == []  # nothing was trained
    relay = MemoryRelay()
    relay.put(world.model_blob)
    params, start = round_inputs(ctx, config, opens, key.ss58_address, relay, Reporter("miner"),
                                 lambda: started.append(True))  # type: ignore[arg-type]  # fmt: skip
    assert started == [True]
    reset = reset_state(config.state_config(), params, config.round_start_step(1))
    assert start.state_hash() == reset.state_hash()


def test_an_overlapped_start_whose_public_input_the_relay_cannot_serve_is_retried(
    world: World, tmp_path: Path
) -> None:
    """Under overlap the start needs the previous round's start model, a public input: the
    relay failing on it is the relay's (RelayError: the follow loop backs off and retries
    the round), never a MinerError that skips the round for good."""
    doc = world.manifest.model_dump(mode="json")
    doc["round"]["overlap"], doc["compression"]["error_feedback"] = True, False
    world = dataclasses.replace(world, manifest=RunManifest.model_validate(doc))
    key = ISLANDS[0]
    relay, opens, _, r0, ctx, config = _round_zero(world, tmp_path)
    fine = start_state(ctx, config, opens, r0.start_params, key.ss58_address, relay)  # type: ignore[arg-type]
    relay.unreachable = {world.model_sha}  # no kept copy here: the relay is asked
    with pytest.raises(RelayError):
        start_state(ctx, config, opens, r0.start_params, key.ss58_address, relay)  # type: ignore[arg-type]
    relay.unreachable = set()
    again = start_state(ctx, config, opens, r0.start_params, key.ss58_address, relay)  # type: ignore[arg-type]
    assert again.state_hash() == fine.state_hash()
