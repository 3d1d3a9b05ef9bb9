"""Train an island's round and publish it: into a blob store (:func:`publish_round`,
:func:`published_round`) or as the replay reads it (:func:`island_round`, with a honeypot's
cheat when asked); :class:`BeaconClock` is the service as an auditor's upload wait sees it."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from hypertrain.auditor.replay import IslandRound
from hypertrain.evidence.index import CheckpointIndex
from hypertrain.evidence.inputs import island_layout, load_samples, round_sample_ids
from hypertrain.evidence.verify import verify_round_open
from hypertrain.honeypot.cheats import Schedule, check_strategy, hooks_for
from hypertrain.miner.checkpoints import write_carried
from hypertrain.miner.hooks import HONEST
from hypertrain.miner.island import IslandResult, train_round
from hypertrain.protocol.envelope import Envelope, seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import Commit, RoundOpen
from hypertrain.relay.errors import NotFoundError, RelayError
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.carried import encode_carried
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.start_state import carried_of, reset_state
from hypertrain.trainer.state import TrainState, init_state
from hypertrain.trainer.update import build_update, next_round_state
from tests.auditor.world import ISLANDS, RUN_ID, World

StartHook = Callable[[TrainState], TrainState]


class MemoryRelay:
    """The relay's download contract (``get`` with a size limit) over a dict."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.unreachable: set[str] = set()  # downloads that fail as a network error would

    def put(self, data: bytes, **_: object) -> str:  # kind, round, expiry: the relay's
        sha = hashlib.sha256(data).hexdigest()
        self.blobs[sha] = data
        return sha

    def get(self, sha256: str, *, max_bytes: int = 1 << 32) -> bytes:
        if sha256 in self.unreachable:
            raise RelayError("unreachable", "connection refused", 0)
        if sha256 not in self.blobs:
            raise NotFoundError(sha256)
        data = self.blobs[sha256]
        if len(data) > max_bytes:
            raise RelayError("too_large", f"blob {sha256} exceeds {max_bytes} bytes")
        return data


@dataclass
class Published:
    commit: Commit
    envelope: dict[str, Any]
    index: CheckpointIndex
    result: IslandResult
    start_params: dict[str, Tensor]


def publish_round(
    world: World,
    relay: MemoryRelay,
    key: Hotkey,
    opens: Sequence[RoundOpen],
    workdir: Path,
    *,
    start: TrainState | None = None,
    tamper: StartHook | None = None,
    run_id: str | None = None,
) -> Published:
    """Train ``key``'s share of the last of ``opens`` honestly from ``start`` (default: the
    ``reset`` state, passed through ``tamper``) and publish checkpoints, index, update."""
    manifest, record = world.manifest, opens[-1]
    layout = island_layout(manifest, record, key.ss58_address)
    config = TrainConfig.from_manifest(manifest, layout=layout, round_index=record.round)
    ids = round_sample_ids(manifest, world.dataset, opens, key.ss58_address)
    params = decode_model_blob(relay.get(record.start_model_sha256), manifest.model)
    if start is None:
        start = reset_state(config.state_config(), params, config.round_start_step(record.round))
    base = start.params()  # the update is the delta from the island's own start
    if tamper is not None:
        start = tamper(start)
    result = train_round(start, config, load_samples(world.dataset, ids), workdir)
    update = build_update(base, result.final, manifest.compression)
    blobs = tuple(relay.put(p.read_bytes()) for p in result.checkpoint_paths)
    carried = None
    if manifest.inner.state_policy == "carry":  # what the next round starts from
        carried = relay.put(write_carried(workdir, result.final, base, manifest).read_bytes())
    leaves = tuple(x.hex() for x in result.leaves)
    index = CheckpointIndex(record.round, leaves, blobs, carried)
    index_sha, update_sha = relay.put(index.to_bytes()), relay.put(update.data)
    body = Commit(
        round=record.round,
        checkpoint_root=result.root.hex(),
        leaf_count=len(result.leaves),
        update_sha256=update_sha,
        update_bytes=len(update.data),
        tokens=result.tokens,
        update_url=f"http://relay/blobs/{update_sha}",
        checkpoint_url=f"http://relay/blobs/{index_sha}",
    )
    env = seal(
        key,
        domain="commit",
        run_id=run_id or manifest.run_id,
        body=body.model_dump(mode="json"),
        expiry_round=10**9,
    ).model_dump(mode="json")
    return Published(body, env, index, result, params)


def inject_moments(direction: float) -> StartHook:
    """The attack: Adam first moments set to ``direction`` (and tiny second moments) in
    checkpoint 0, then honest training; the update leans the way the island chose."""

    def tamper(state: TrainState) -> TrainState:
        tensors = dict(state.tensors)
        for name in tensors:
            if name.startswith("optim.exp_avg."):
                tensors[name] = torch.full_like(tensors[name], direction)
            elif name.startswith("optim.exp_avg_sq."):
                tensors[name] = torch.full_like(tensors[name], 1e-6)
        return TrainState(state.step, tensors, state.config_digest)

    return tamper


@dataclass(frozen=True)
class Records:
    """The two records of a round that an auditor reads."""

    open: Envelope
    commits: list[Envelope]


def published_round(world: World, tmp: Path) -> tuple[MemoryRelay, Records, CheckpointIndex]:
    """Island 0's round 0 trained honestly (a fresh start from the world's model) and
    published into a new relay: the records an auditor reads and the checkpoint index."""
    relay, island = MemoryRelay(), ISLANDS[0]
    relay.put(world.model_blob)
    opened = world.round_open(0, [island.ss58_address]).model_dump()
    record = verify_round_open(opened, world.manifest, 0)
    config = TrainConfig.from_manifest(world.manifest)
    ids = round_sample_ids(world.manifest, world.dataset, [record], island.ss58_address)
    params = decode_model_blob(world.model_blob, world.manifest.model)
    start = next_round_state(init_state(config.state_config(), world.manifest.seed), params, None)
    result = train_round(start, config, load_samples(world.dataset, ids), tmp)
    update = build_update(params, result.final, world.manifest.compression)
    blobs = tuple(relay.put(p.read_bytes()) for p in result.checkpoint_paths)
    carried = None
    if world.manifest.inner.state_policy == "carry":
        compression = world.manifest.compression
        carried = relay.put(encode_carried(carried_of(result.final, params, compression)))
    index = CheckpointIndex(0, tuple(x.hex() for x in result.leaves), blobs, carried)
    index_sha, update_sha = relay.put(index.to_bytes()), relay.put(update.data)
    body = Commit(
        round=0,
        checkpoint_root=result.root.hex(),
        leaf_count=3,
        update_sha256=update_sha,
        update_bytes=len(update.data),
        tokens=result.tokens,
        update_url=f"http://relay/blobs/{update_sha}",
        checkpoint_url=f"http://relay/blobs/{index_sha}",
    )
    commit = seal(
        island,
        domain="commit",
        run_id=RUN_ID,
        body=body.model_dump(mode="json"),
        expiry_round=10**9,
    )
    return relay, Records(Envelope.model_validate(opened), [commit]), index


def island_round(
    world: World, workdir: Path, strategy: str | None
) -> tuple[IslandRound, dict[str, bytes]]:
    """Train island 0's round 0 with ``strategy`` and publish it into an in-memory relay.

    A cheat goes in as the honeypot tooling injects it: as the round hooks the miner's
    round computes with.
    """
    manifest = world.manifest
    config = TrainConfig.from_manifest(manifest)
    roster = [k.ss58_address for k in ISLANDS]
    opens = [verify_round_open(world.round_open(0, roster).model_dump(), manifest, 0)]
    hotkey = ISLANDS[0].ss58_address
    ids = round_sample_ids(manifest, world.dataset, opens, hotkey)
    honest = load_samples(world.dataset, ids)
    params = decode_model_blob(world.model_blob, manifest.model, world.model_sha)
    start = next_round_state(init_state(config.state_config(), manifest.seed), params, None)
    hooks = HONEST if strategy is None else hooks_for(Schedule(check_strategy(strategy)))(0)
    trained = hooks.samples(world.dataset, ids)
    result = train_round(start, config, trained, workdir, step=hooks.step)
    update = hooks.update(params, result.final, manifest.compression)
    store = {
        hashlib.sha256(p.read_bytes()).hexdigest(): p.read_bytes() for p in result.checkpoint_paths
    }
    index = CheckpointIndex(0, tuple(x.hex() for x in result.leaves), tuple(store))
    commit = Commit(
        round=0,
        checkpoint_root=result.root.hex(),
        leaf_count=len(result.leaves),
        update_sha256=hashlib.sha256(update.data).hexdigest(),
        update_bytes=len(update.data),
        tokens=result.tokens,
        update_url="u",
    )
    return IslandRound(manifest, commit, index, honest, params), store


class BeaconClock:
    """The service as far as the auditor's upload wait sees it: the beacon round only.

    Each call advances one round, so an auditor polling for a missing checkpoint reaches
    the deadline after a bounded number of polls; ``on_poll`` lets a test upload late."""

    def __init__(self, start: int, on_poll: Any = None) -> None:
        self.round, self.on_poll, self.polls = start, on_poll, 0

    def beacon_round(self) -> int:
        self.polls += 1
        if self.on_poll is not None:
            self.on_poll(self.polls)
        self.round += 1
        return self.round
