"""Replay assigned segments of one island's round and compare bytes with its commitment.

:func:`audit_island` is the whole check for one assignment. It first checks that
leaf 0 (under the committed root, by inclusion proof) is the hash of the round's
*full* start state: parameters, optimizer state, step counter and residual, as the
run's state policy derives it (:mod:`hypertrain.trainer.start_state`). For each
assigned segment ``k`` it then fetches the checkpoint at step ``kJ`` (for ``k = 0``
the derived start state itself), checks its bytes hash to leaf ``k``, replays ``J``
steps on the island's verified samples with the island's own layout (as the signed
round-open record names it), and compares the state hash with leaf ``k + 1``. The replay
runs in one process whatever the layout's ``world``, ``ep`` and ``zero1``: an island's
processes, expert placement and optimizer sharding change none of its bytes. For
the final segment the update is re-encoded from the replayed final state and its
SHA-256 compared with the committed one, and under ``carry`` the address of the carried
state the index names with the replayed final state's carried state's
(``trainer.carried``; later rounds' audits fetch it by that address). The first failure
decides the verdict:

* ``mismatch``: a proven difference (a leaf or the update is not what the public
  inputs give);
* ``unverifiable``: the island's own inputs (index, checkpoint bytes and the step
  each must carry, proofs) could not be fetched, parsed or proven, or judging them
  raised anything at all. The island authored them, so this is its fault.

A transport failure of the auditor's own (relay unreachable) raises instead, so the
auditor retries rather than punish an island for its own network.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from torch import Tensor

from hypertrain.api.errors import ServiceError
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.index import CheckpointIndex
from hypertrain.evidence.inputs import segment_samples
from hypertrain.protocol.manifest import LayoutSpec, RunManifest
from hypertrain.protocol.messages import Commit
from hypertrain.relay.errors import RelayError
from hypertrain.trainer.carried import encode_carried, slot_dtype
from hypertrain.trainer.checkpoint import decode_checkpoint
from hypertrain.trainer.errors import TrainerError
from hypertrain.trainer.round_config import island_train_config
from hypertrain.trainer.segment import Sample, TrainConfig, run_segment
from hypertrain.trainer.start_state import carried_of, reset_state
from hypertrain.trainer.state import TrainState
from hypertrain.trainer.update import build_update

FetchBlob = Callable[[str], bytes]
Result = Literal["match", "mismatch", "unverifiable"]
Check = Literal["start", "segment", "update"]


@dataclass(frozen=True, slots=True)
class AuditOutcome:
    result: Result
    first_bad_leaf: int | None
    update_checked: bool
    detail: str
    segments: tuple[int, ...]
    check: Check | None = None  # which check decided a mismatch (what a dispute may contest)
    # a match's replayed carried state, encoded (the final segment replayed under
    # ``carry``): the auditor stores it on the relay for the next round's audits
    # (RoundOpen.carry_stored)
    carried: bytes | None = None


@dataclass(frozen=True, slots=True)
class IslandRound:
    """Everything verified about one island's round that a replay needs."""

    manifest: RunManifest
    commit: Commit
    index: CheckpointIndex
    samples: Sequence[Sample]  # the island's verified samples, in training order
    start_params: dict[str, Tensor]
    layout: LayoutSpec | None = None  # from the signed round-open record; None = the run's
    start_state: TrainState | None = None  # derived start state; None = the ``reset`` one


class _FailedError(Exception):
    def __init__(
        self, result: Result, leaf: int | None, detail: str, check: Check = "segment"
    ) -> None:
        self.result, self.leaf, self.detail, self.check = result, leaf, detail, check


def expected_start(island: IslandRound, config: TrainConfig) -> TrainState:
    """The full state leaf 0 must hash to (the ``reset`` state unless one was derived)."""
    if island.start_state is not None:
        return island.start_state
    return reset_state(
        config.state_config(), island.start_params, config.round_start_step(island.commit.round)
    )


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


def _verified_leaf(island: IslandRound, k: int) -> bytes:
    try:
        return island.index.verified_leaf(k, island.commit.checkpoint_root)
    except VerificationError as exc:
        raise _FailedError("unverifiable", k, f"unverifiable leaf: {exc}") from exc


def _check_start(island: IslandRound, start: TrainState) -> None:
    if island.index.round != island.commit.round:
        raise _FailedError("unverifiable", 0, "checkpoint index is for another round")
    if len(island.index.leaves) != island.commit.leaf_count:
        raise _FailedError("unverifiable", 0, "checkpoint index does not list every leaf")
    with _island_bytes(0, "hash of the derived start state"):
        start_hash = start.state_hash()
    if _verified_leaf(island, 0) != start_hash:
        policy = island.manifest.inner.state_policy
        raise _FailedError(
            "mismatch", 0, f"checkpoint 0 is not the round's start state ({policy} policy)",
            "start",
        )  # fmt: skip


def _segment(
    island: IslandRound, k: int, fetch: FetchBlob, config: TrainConfig, start0: TrainState
) -> TrainState:
    expected = _verified_leaf(island, k + 1)
    j = config.checkpoint_interval
    if k == 0:
        start = start0  # leaf 0 was checked to be exactly this state's hash
    else:
        try:
            start = load_verified_checkpoint(island, k, fetch, config)
        except VerificationError as exc:
            raise _FailedError("unverifiable", k, f"unverifiable checkpoint: {exc}") from exc
        if start.step != start0.step + k * j:  # the counter is the island's too
            detail = f"checkpoint {k} carries step {start.step}, not {start0.step + k * j}"
            raise _FailedError("unverifiable", k, detail)
    chunk = segment_samples(island.samples, config, k)
    with _island_bytes(k, f"replay of segment {k} from the island's state"):
        end = run_segment(start, config, chunk, j, local_step=k * j)
        reached = end.state_hash()
    if reached != expected:
        raise _FailedError(
            "mismatch", k + 1, f"replay of segment {k} does not reproduce leaf {k + 1}"
        )
    return end


@contextmanager
def _island_bytes(leaf: int, what: str) -> Iterator[None]:
    """Any failure while judging island-authored bytes is an ``unverifiable`` verdict.

    Transport failures of the auditor's own (relay, service) still raise, so it retries.
    """
    try:
        yield
    except (_FailedError, RelayError, ServiceError):
        raise
    except Exception as exc:
        raise _FailedError(
            "unverifiable", leaf, f"{what}: {type(exc).__name__}: {exc}"[:2048]
        ) from exc


def _check_update(island: IslandRound, end: TrainState) -> bytes | None:
    """Check the update re-encoded from the replayed final state and, under ``carry``, the
    address of the carried state the index names (later rounds' audits fetch it there);
    returns that carried state's bytes (None without ``carry``)."""
    last = island.commit.leaf_count - 1
    compression = island.manifest.compression
    update = build_update(island.start_params, end, compression)
    if hashlib.sha256(update.data).hexdigest() != island.commit.update_sha256:
        raise _FailedError(
            "mismatch", last, "uploaded update is not the compressed delta of the final state",
            "update",
        )  # fmt: skip
    if island.manifest.inner.state_policy != "carry":
        return None
    slots = slot_dtype(island.manifest.inner)
    carried = carried_of(end, island.start_params, compression, update.residual, slots=slots)
    encoded = encode_carried(carried)
    if island.index.carried != hashlib.sha256(encoded).hexdigest():
        raise _FailedError(
            "mismatch", last, "the index's carried state address is not the replayed final"
            " state's carried state", "update",
        )  # fmt: skip
    return encoded


def audit_island(island: IslandRound, segments: Sequence[int], fetch: FetchBlob) -> AuditOutcome:
    """Check leaf 0, replay ``segments`` and return the verdict (see the module docstring)."""
    config = island_train_config(island.manifest, island.commit.round, layout=island.layout)
    last = island.manifest.round.num_segments - 1
    ordered = tuple(sorted(set(segments)))
    update_checked = last in ordered
    carried: bytes | None = None
    try:
        with _island_bytes(0, "derived start state"):
            start0 = expected_start(island, config)
        _check_start(island, start0)
        for k in ordered:
            end = _segment(island, k, fetch, config, start0)
            if k == last:  # the replay from island-authored bytes may hold anything
                with _island_bytes(last, "the update check of the replayed final state"):
                    carried = _check_update(island, end)
    except _FailedError as bad:
        check = bad.check if bad.result == "mismatch" else None
        return AuditOutcome(bad.result, bad.leaf, update_checked, bad.detail, ordered, check)
    return AuditOutcome("match", None, update_checked, "", ordered, carried=carried)
