"""Derive the start state of an island's round from public records, for either policy.

Under ``reset`` the state depends only on the merged model and the round index.
Under ``carry`` it also depends on the island's previous round: when the island
committed in round ``r - 1``, the state that round carried (``trainer.carried``: step
counter, optimizer slots, residual) is fetched at the address that commit's checkpoint
index names, and the start state is the merged model with it (``carry_state``); an
island with no commit in round ``r - 1`` starts from the ``reset`` state. With
overlapped rounds (``round.overlap``) an island that committed in
round ``r - 1`` starts, under either policy, from round ``r - 1``'s start model minus
``1 / M`` of its own committed round ``r - 1`` update (fetched by its committed hash;
``M`` is round ``r - 1``'s roster size: :func:`~hypertrain.trainer.start_state.
overlap_params`) instead of round ``r``'s merged model, so it can start before round
``r - 1`` is merged. An island the round-open record lists in ``fresh_start`` (a proven
fault in an earlier round: it is replayed every round) starts from the ``reset`` state
whatever it committed before (:func:`carries_previous`), so its audits need nothing it
holds privately. The miner and the auditor call the same functions, so both sides
derive the same bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from torch import Tensor

from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.index import MAX_INDEX_BYTES, CheckpointIndex, sha_from_url
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import Commit, RoundOpen
from hypertrain.trainer.carried import CarriedState, carried_size, decode_carried
from hypertrain.trainer.errors import TrainerError
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.start_state import carry_state, overlap_params, reset_state
from hypertrain.trainer.state import TrainState

FetchSized = Callable[[str, int], bytes]  # (sha256, max_bytes) -> bytes


@dataclass(frozen=True, slots=True)
class PreviousRound:
    """What ``carry`` and overlapped rounds need of round ``r - 1``: the island's verified
    commit, if any, that round's start model and its roster size."""

    commit: Commit | None
    start_params: Callable[[], Mapping[str, Tensor]]  # round r-1's start model (lazy)
    roster_size: int = 0  # round r-1's roster (overlapped rounds)


def needs_previous(manifest: RunManifest, index: int) -> bool:
    """Whether round ``index``'s start state depends on the island's round ``index - 1``."""
    return index > 0 and (manifest.inner.state_policy == "carry" or manifest.round.overlap)


def carries_previous(manifest: RunManifest, record: RoundOpen, hotkey: str) -> bool:
    """Whether ``hotkey``'s start state of round ``record.round`` depends on its previous
    round: the policy asks for it and the record does not list the island to start fresh."""
    return needs_previous(manifest, record.round) and hotkey not in record.fresh_start


def overlapped_start(
    manifest: RunManifest, previous: PreviousRound, fetch: FetchSized
) -> dict[str, Tensor]:
    """The parameters an island that committed round ``r - 1`` starts round ``r`` from
    under ``round.overlap`` (see the module docstring); VerificationError if its update
    is not the committed one."""
    commit = previous.commit
    assert commit is not None
    start = previous.start_params()  # a public input: its failures are not the island's
    data = fetch(commit.update_sha256, commit.update_bytes)
    if hashlib.sha256(data).hexdigest() != commit.update_sha256:
        raise VerificationError(f"round {commit.round}'s update is not the committed one")
    try:
        return overlap_params(start, data, previous.roster_size, manifest.compression)
    except (ValueError, TrainerError) as exc:
        raise VerificationError(f"round {commit.round}'s update: {exc}") from exc


def previous_carried(commit: Commit, config: TrainConfig, fetch: FetchSized) -> CarriedState:
    """The state ``commit``'s round carried, at the address its index names (a blob's
    address is its SHA-256, so the bytes are the committed ones), validated;
    VerificationError if it is missing, malformed or at another step."""
    index = CheckpointIndex.from_bytes(
        fetch(sha_from_url(commit.checkpoint_url), MAX_INDEX_BYTES), leaf_count=commit.leaf_count
    )
    if index.round != commit.round:
        raise VerificationError("previous checkpoint index is for another round")
    if index.carried is None:
        raise VerificationError("previous checkpoint index names no carried state")
    state_config = config.state_config()
    data = fetch(index.carried, carried_size(state_config))
    if hashlib.sha256(data).hexdigest() != index.carried:
        raise VerificationError("previous carried state is not the one its index names")
    try:
        carried = decode_carried(data, state_config)
    except TrainerError as exc:
        raise VerificationError(f"previous carried state: {exc}") from exc
    must = config.round_start_step(commit.round + 1)  # where round r - 1 ends
    if carried.step != must:
        raise VerificationError(f"previous carried state has step {carried.step}, not {must}")
    return carried


def derive_start_state(
    manifest: RunManifest,
    config: TrainConfig,
    index: int,
    merged: Mapping[str, Tensor],
    previous: PreviousRound | None,
    fetch: FetchSized,
) -> TrainState:
    """The state checkpoint 0 of round ``index`` must be (see the module docstring)."""
    state_config = config.state_config()
    if not needs_previous(manifest, index) or previous is None or previous.commit is None:
        return reset_state(state_config, merged, config.round_start_step(index))
    if manifest.round.overlap:
        merged = overlapped_start(manifest, previous, fetch)
    if manifest.inner.state_policy != "carry":
        return reset_state(state_config, merged, config.round_start_step(index))
    carried = previous_carried(previous.commit, config, fetch)
    try:
        return carry_state(carried, merged, state_config)
    except ValueError as exc:
        raise VerificationError(f"previous carried state: {exc}") from exc
