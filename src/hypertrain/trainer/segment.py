"""Segments and rounds: training as a pure function of public inputs.

``run_segment(start, config, samples, num_steps)`` is a function of the start state
bytes, the config (from the run manifest), the ordered samples and the number of
steps, nothing else. Samples are ``(sample_id, tokens)`` pairs of exactly
``seq_len`` tokens (the manifest's ``data.seq_len``): inputs are ``tokens[:-1]``,
targets ``tokens[1:]``, so a step trains on ``B * (seq_len - 1)`` predicted tokens.
Local step ``i`` of a run consumes ``samples[i*B : (i+1)*B]`` in order. The learning
rate follows the run's global step ``offset + round_index * H + i`` (``offset``: the
manifest's warm-start steps, 0 without one), so every island applies the same schedule
to the same merged model, however late it joined; the optimizer's bias correction
follows the state's own step counter.

``run_round`` trains H steps and hashes the state at local steps 0, J, 2J, ..., H:
these ``H/J + 1`` state hashes are the Merkle leaves (``protocol.merkle``) whose root
the island commits. Segment k (steps [kJ, (k+1)J)) replayed from the checkpoint at
kJ must reproduce leaf k+1 byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
import torch
from torch import Tensor

from hypertrain.protocol.manifest import (
    CompressionSpec,
    DeterminismRecord,
    InnerOptimSpec,
    LayoutSpec,
    ModelSpec,
    RunManifest,
)
from hypertrain.protocol.merkle import MerkleTree
from hypertrain.trainer.checkpoint import decode_checkpoint
from hypertrain.trainer.determinism import check_determinism
from hypertrain.trainer.errors import SampleError, TrainerError
from hypertrain.trainer.state import StateConfig, TrainState
from hypertrain.trainer.step import HONEST, StepHooks, StepStats, train_step

Sample = tuple[int, Any]  # (sample_id, tokens: ndarray | Tensor | Sequence[int])
CheckpointHook = Callable[[int, TrainState], None]


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """The manifest sections a training segment depends on."""

    model: ModelSpec
    inner: InnerOptimSpec
    layout: LayoutSpec
    seq_len: int
    inner_steps: int = 1  # H
    checkpoint_interval: int = 1  # J
    compression: CompressionSpec = field(default_factory=CompressionSpec)
    dtype: Literal["float32", "bfloat16"] = "float32"
    device: str = "cpu"
    round_index: int = 0  # the learning-rate schedule's step is round_index * H + local step
    schedule_offset: int = 0  # ... plus this: the steps trained before round 0 (warm start)

    @classmethod
    def from_manifest(
        cls,
        manifest: RunManifest,
        device: str = "cpu",
        *,
        layout: LayoutSpec | None = None,
        round_index: int = 0,
    ) -> TrainConfig:
        """The config of one island in round ``round_index``: ``layout`` is its admitted one
        (default: the run's)."""
        return cls(
            model=manifest.model,
            inner=manifest.inner,
            layout=manifest.round.layout if layout is None else layout,
            seq_len=manifest.data.seq_len,
            inner_steps=manifest.round.inner_steps,
            checkpoint_interval=manifest.round.checkpoint_interval,
            compression=manifest.compression,
            dtype=manifest.determinism.dtype,
            device=device,
            round_index=round_index,
            schedule_offset=manifest.first_round_step,
        )

    def state_config(self) -> StateConfig:
        return StateConfig(self.model, self.inner, self.compression.error_feedback)

    @property
    def samples_per_step(self) -> int:
        return self.layout.samples_per_step

    def round_start_step(self, round_index: int) -> int:
        """The run's global step at the start of round ``round_index`` (warm start included)."""
        return self.schedule_offset + round_index * self.inner_steps

    def schedule_step(self, local_step: int) -> int:
        """The run's global step of this round's ``local_step``: what the schedule follows."""
        return self.round_start_step(self.round_index) + local_step

    @property
    def tokens_per_step(self) -> int:
        return self.samples_per_step * (self.seq_len - 1)


@dataclass(frozen=True, slots=True)
class RoundResult:
    leaves: list[bytes]  # state hashes at local steps 0, J, ..., H
    root: bytes
    final: TrainState
    tokens: int
    losses: list[float]


def samples_to_batch(samples: Sequence[Sample], config: TrainConfig) -> Tensor:
    """Stack samples into a (N, seq_len) int64 tensor, refusing bad lengths or token ids."""
    rows = []
    for sample_id, tokens in samples:
        arr = np.asarray(tokens.cpu() if isinstance(tokens, Tensor) else tokens)
        if arr.ndim != 1 or arr.shape[0] != config.seq_len:
            raise SampleError(
                f"sample {sample_id}: shape {arr.shape}, expected ({config.seq_len},)"
            )
        if arr.dtype.kind not in "iu":
            raise SampleError(f"sample {sample_id}: tokens must be integers, got {arr.dtype}")
        if arr.size and (arr.min() < 0 or arr.max() >= config.model.vocab_size):
            raise SampleError(
                f"sample {sample_id}: token id outside [0, {config.model.vocab_size})"
            )
        rows.append(torch.from_numpy(arr.astype(np.int64)))
    return torch.stack(rows).to(config.device)


def _check_start(start: TrainState, config: TrainConfig) -> None:
    if start.config_digest != config.state_config().digest():
        raise TrainerError("start state was made for another model or optimizer config")


def run_segment(
    start: TrainState,
    config: TrainConfig,
    samples: Sequence[Sample],
    num_steps: int,
    *,
    hooks: StepHooks = HONEST,
    stats: list[StepStats] | None = None,
    local_step: int = 0,
) -> TrainState:
    """Train ``num_steps`` steps from ``start`` (not modified), which is at ``local_step``
    of the round, and return the end state."""
    _check_start(start, config)
    per_step = config.samples_per_step
    if len(samples) != num_steps * per_step:
        raise SampleError(
            f"{num_steps} steps need {num_steps * per_step} samples, got {len(samples)}"
        )
    batch = samples_to_batch(samples, config) if samples else None
    tensors = {k: v.detach().to(config.device, copy=True) for k, v in start.tensors.items()}
    autocast = torch.bfloat16 if config.dtype == "bfloat16" else None
    for i in range(num_steps):
        assert batch is not None
        rows = batch[i * per_step : (i + 1) * per_step]
        result = train_step(
            tensors,
            start.step + i,
            rows,
            config.model,
            config.inner,
            config.layout,
            autocast_dtype=autocast,
            hooks=hooks,
            schedule_step=config.schedule_step(local_step + i),
        )
        if stats is not None:
            stats.append(result)
    cpu = {k: v.cpu() if v.device.type != "cpu" else v for k, v in tensors.items()}
    return TrainState(start.step + num_steps, cpu, start.config_digest)


class StepRunner(Protocol):
    """One step of a round: ``state`` (at ``local_step``) on the step's samples -> the
    next state and the step's statistics."""

    def __call__(
        self, state: TrainState, config: TrainConfig, samples: Sequence[Sample], local_step: int, /
    ) -> tuple[TrainState, StepStats]: ...


def one_step(
    state: TrainState, config: TrainConfig, samples: Sequence[Sample], local_step: int
) -> tuple[TrainState, StepStats]:
    """The honest :class:`StepRunner`: :func:`run_segment` of one step."""
    stats: list[StepStats] = []
    return run_segment(state, config, samples, 1, stats=stats, local_step=local_step), stats[0]


class Stepper(Protocol):
    """A round's state as the round loop drives it: one step at a time."""

    def advance(self, samples: Sequence[Sample], local_step: int) -> StepStats:
        """Train local step ``local_step`` on its samples."""
        ...

    def gather(self) -> TrainState | None:
        """The full state (None on processes other than an island's first; collective)."""
        ...


SegmentHook = Callable[[int, TrainState | None, list[StepStats]], None]
StepHook = Callable[[int, StepStats], None]


def check_round(config: TrainConfig, samples: Sequence[Sample]) -> None:
    """Refuse a round whose J does not divide H or whose samples are not H steps' worth."""
    h, j, per = config.inner_steps, config.checkpoint_interval, config.samples_per_step
    if h % j:
        raise TrainerError(f"checkpoint interval {j} does not divide {h} inner steps")
    if len(samples) != h * per:
        raise SampleError(f"a round of {h} steps needs {h * per} samples, got {len(samples)}")


def round_loop(
    stepper: Stepper,
    config: TrainConfig,
    samples: Sequence[Sample],
    *,
    first_segment: int = 0,
    on_segment: SegmentHook | None = None,
    on_step: StepHook | None = None,
) -> list[StepStats]:
    """The one round loop: segments ``first_segment .. H/J - 1`` of ``J`` steps each; after
    each, ``on_segment(k + 1, full state or None, the segment's stats)``. ``samples`` are
    the whole round's. Returns the stats of the steps it trained."""
    check_round(config, samples)
    h, j, per = config.inner_steps, config.checkpoint_interval, config.samples_per_step
    stats: list[StepStats] = []
    for k in range(first_segment, h // j):
        segment: list[StepStats] = []
        for local in range(k * j, (k + 1) * j):
            segment.append(stepper.advance(samples[local * per : (local + 1) * per], local))
            if on_step is not None:
                on_step(local, segment[-1])
        full = stepper.gather()
        if on_segment is not None:
            on_segment(k + 1, full, segment)
        stats.extend(segment)
    return stats


class LocalStepper:
    """The round loop's :class:`Stepper` in one process: ``step`` (honest: one
    :func:`run_segment` step) applied to a :class:`TrainState`."""

    def __init__(self, state: TrainState, config: TrainConfig, step: StepRunner | None = None):
        _check_start(state, config)
        self.state, self.config = state, config
        self._step: StepRunner = one_step if step is None else step

    def advance(self, samples: Sequence[Sample], local_step: int) -> StepStats:
        self.state, stats = self._step(self.state, self.config, samples, local_step)
        return stats

    def gather(self) -> TrainState:
        return self.state


def round_result(
    leaves: list[bytes], final: TrainState, config: TrainConfig, stats: Sequence[StepStats]
) -> RoundResult:
    root = MerkleTree.from_leaves(leaves).root
    return RoundResult(leaves, root, final, config.inner_steps * config.tokens_per_step,
                       [s.loss for s in stats])  # fmt: skip


def run_round(
    start: TrainState,
    config: TrainConfig,
    samples: Sequence[Sample],
    *,
    on_checkpoint: CheckpointHook | None = None,
) -> RoundResult:
    """Train H steps, hashing the state every J steps; see the module docstring."""
    check_round(config, samples)
    stepper = LocalStepper(start, config)
    leaves = [start.state_hash()]
    if on_checkpoint is not None:
        on_checkpoint(0, start)

    def segment_done(k: int, state: TrainState | None, _: list[StepStats]) -> None:
        assert state is not None
        leaves.append(state.state_hash())
        if on_checkpoint is not None:
            on_checkpoint(k, state)

    stats = round_loop(stepper, config, samples, on_segment=segment_done)
    return round_result(leaves, stepper.state, config, stats)


def replay_segment(
    manifest: RunManifest,
    checkpoint: bytes,
    start_leaf: bytes,
    samples: Sequence[Sample],
    *,
    local: DeterminismRecord,
    device: str = "cpu",
    layout: LayoutSpec | None = None,
    round_index: int = 0,
    segment: int = 0,
) -> bytes:
    """An auditor's replay of segment ``segment`` of round ``round_index``: refuse on a
    determinism mismatch, load the checkpoint only if it hashes to ``start_leaf``, train J
    steps with the island's ``layout`` (default: the run's), return the end hash."""
    check_determinism(local, manifest.determinism)
    config = TrainConfig.from_manifest(manifest, device, layout=layout, round_index=round_index)
    start = decode_checkpoint(checkpoint, config.state_config(), expected_hash=start_leaf)
    j = config.checkpoint_interval
    return run_segment(start, config, samples, j, local_step=segment * j).state_hash()
