"""Replay assigned segments of one island's round and compare bytes with its commitment.

:func:`audit_island` is the whole check for one assignment. For each assigned segment
``k`` it verifies leaf ``k`` against the committed root (inclusion proof), fetches the
checkpoint at step ``kJ`` and checks its bytes hash to that leaf, replays ``J`` steps
on the island's verified samples with the island's own layout (as the signed
round-open record names it), and compares the state hash with leaf ``k + 1``. For
segment 0 the checkpoint's parameters must equal the round's start model; for the
final segment the update is re-encoded from the replayed final state and its SHA-256
compared with the committed one. The first failure decides the verdict.

An island that cannot produce a verifiable checkpoint is judged a mismatch (it
committed to bytes it cannot show); a transport failure raises instead, so the
auditor retries rather than punish an island for the auditor's own network.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from hypertrain.auditor.errors import VerificationError
from hypertrain.auditor.index import CheckpointIndex
from hypertrain.protocol.manifest import LayoutSpec, RunManifest
from hypertrain.protocol.messages import Commit
from hypertrain.trainer.checkpoint import decode_checkpoint
from hypertrain.trainer.errors import TrainerError
from hypertrain.trainer.segment import Sample, TrainConfig, run_segment
from hypertrain.trainer.state import TrainState
from hypertrain.trainer.update import build_update

FetchBlob = Callable[[str], bytes]


@dataclass(frozen=True, slots=True)
class AuditOutcome:
    result: Literal["match", "mismatch"]
    first_bad_leaf: int | None
    update_checked: bool
    detail: str
    segments: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class IslandRound:
    """Everything verified about one island's round that a replay needs."""

    manifest: RunManifest
    commit: Commit
    index: CheckpointIndex
    samples: Sequence[Sample]  # the island's verified samples, in training order
    start_params: dict[str, Tensor]
    layout: LayoutSpec | None = None  # from the signed round-open record; None = the run's


class _MismatchError(Exception):
    def __init__(self, leaf: int | None, detail: str) -> None:
        self.leaf, self.detail = leaf, detail


def load_verified_checkpoint(
    island: IslandRound, k: int, fetch: FetchBlob, config: TrainConfig
) -> TrainState:
    """Checkpoint at leaf ``k``, verified against the committed root; VerificationError if not."""
    leaf = island.index.verified_leaf(k, island.commit.checkpoint_root)
    data = fetch(island.index.blobs[k])
    try:
        return decode_checkpoint(data, config.state_config(), expected_hash=leaf)
    except TrainerError as exc:
        raise VerificationError(f"checkpoint {k}: {exc}") from exc


def _segment(island: IslandRound, k: int, fetch: FetchBlob, config: TrainConfig) -> TrainState:
    try:
        start = load_verified_checkpoint(island, k, fetch, config)
        expected = island.index.verified_leaf(k + 1, island.commit.checkpoint_root)
    except VerificationError as exc:
        raise _MismatchError(k, f"unverifiable checkpoint: {exc}") from exc
    if k == 0:
        params = start.params()
        if any(not torch.equal(params[n], island.start_params[n]) for n in island.start_params):
            raise _MismatchError(0, "checkpoint 0 does not hold the round's start model")
    per_segment = config.checkpoint_interval * config.samples_per_step
    chunk = island.samples[k * per_segment : (k + 1) * per_segment]
    j = config.checkpoint_interval
    end = run_segment(start, config, chunk, j, local_step=k * j)
    if end.state_hash() != expected:
        raise _MismatchError(k + 1, f"replay of segment {k} does not reproduce leaf {k + 1}")
    return end


def _check_update(island: IslandRound, end: TrainState) -> None:
    update = build_update(island.start_params, end, island.manifest.compression)
    if hashlib.sha256(update.data).hexdigest() != island.commit.update_sha256:
        raise _MismatchError(
            island.commit.leaf_count - 1,
            "uploaded update is not the compressed delta of the final state",
        )


def audit_island(island: IslandRound, segments: Sequence[int], fetch: FetchBlob) -> AuditOutcome:
    """Replay ``segments`` and return the verdict (see the module docstring)."""
    config = TrainConfig.from_manifest(
        island.manifest, layout=island.layout, round_index=island.commit.round
    )
    last = island.manifest.round.num_segments - 1
    ordered = tuple(sorted(set(segments)))
    update_checked = last in ordered
    try:
        for k in ordered:
            end = _segment(island, k, fetch, config)
            if k == last:
                _check_update(island, end)
    except _MismatchError as bad:
        return AuditOutcome("mismatch", bad.leaf, update_checked, bad.detail, ordered)
    return AuditOutcome("match", None, update_checked, "", ordered)
