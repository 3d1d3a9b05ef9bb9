"""Train an island's round from a given start state and publish it into a blob store."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from hypertrain.evidence.index import CheckpointIndex
from hypertrain.evidence.inputs import island_layout, load_samples, round_sample_ids
from hypertrain.miner.island import IslandResult, train_round
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import Commit, RoundOpen
from hypertrain.relay.errors import NotFoundError, RelayError
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.start_state import reset_state
from hypertrain.trainer.state import TrainState
from hypertrain.trainer.update import build_update
from tests.auditor.world import World

StartHook = Callable[[TrainState], TrainState]


class MemoryRelay:
    """The relay's download contract (``get`` with a size limit) over a dict."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.unreachable: set[str] = set()  # downloads that fail as a network error would

    def put(self, data: bytes) -> str:
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
    config = TrainConfig.from_manifest(manifest, layout=layout)
    ids = round_sample_ids(manifest, world.dataset, opens, key.ss58_address)
    params = decode_model_blob(relay.get(record.start_model_sha256), manifest.model)
    if start is None:
        start = reset_state(config.state_config(), params, config.round_start_step(record.round))
    if tamper is not None:
        start = tamper(start)
    result = train_round(start, config, load_samples(world.dataset, ids), workdir)
    update = build_update(params, result.final, manifest.compression)
    blobs = tuple(relay.put(p.read_bytes()) for p in result.checkpoint_paths)
    index = CheckpointIndex(record.round, tuple(x.hex() for x in result.leaves), blobs)
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
