"""The one place an island's :class:`TrainConfig` for round ``r`` is built, and the one
place a warm-start step's is (:func:`warm_start_config`).

The learning-rate schedule follows the run's global step ``offset + round_index * H +
local step`` (``trainer.segment``; ``offset`` is the manifest's warm-start steps). A
caller that builds the config itself and forgets ``round_index`` trains every round at
the schedule's step 0 (the warmup's first rate) without any error: the parity harness
once did exactly that. Every caller that trains or replays a round (the miner, its ranks,
the auditor, the dispute parties and the parity simulator) goes through
:func:`island_train_config`, whose ``round_index`` has no default."""

from __future__ import annotations

from dataclasses import replace

from hypertrain.protocol.manifest import LayoutSpec, RunManifest
from hypertrain.trainer.errors import TrainerError
from hypertrain.trainer.segment import TrainConfig


class RoundIndexError(TrainerError):
    """A round index that is not a non-negative integer."""


class WarmStartError(TrainerError):
    """A warm-start step of a manifest without one, or outside its steps."""


def island_train_config(
    manifest: RunManifest,
    round_index: int,
    *,
    layout: LayoutSpec | None = None,
    device: str = "cpu",
) -> TrainConfig:
    """The config one island trains (or an auditor replays) round ``round_index`` with:
    ``layout`` is the island's admitted layout (default: the run's)."""
    if isinstance(round_index, bool) or not isinstance(round_index, int) or round_index < 0:
        raise RoundIndexError(f"round_index must be a non-negative int, got {round_index!r}")
    return TrainConfig.from_manifest(manifest, device, layout=layout, round_index=round_index)


def warm_start_config(manifest: RunManifest, step: int, *, device: str = "cpu") -> TrainConfig:
    """The config of warm-start step ``step``: one data-parallel step of the run's inner
    optimizer on the warm start's global batch, at the schedule's global step ``step``."""
    warm = manifest.warm_start
    if warm is None:
        raise WarmStartError(f"run {manifest.run_id} has no warm start")
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < warm.steps:
        raise WarmStartError(f"warm-start step must be an int in [0, {warm.steps}), got {step!r}")
    return data_parallel_config(manifest, step, warm.samples_per_step, device=device)


def data_parallel_config(
    manifest: RunManifest, step: int, samples: int, *, device: str = "cpu"
) -> TrainConfig:
    """One data-parallel step of the run's inner optimizer on a global batch of ``samples``
    at the schedule's global step ``step``: the warm start's steps, and the baseline that
    trains the tokens of a whole run on one model (``trainer.warm_start``)."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise RoundIndexError(f"a data-parallel step must be a non-negative int, got {step!r}")
    if samples < 1:
        raise TrainerError(f"a data-parallel step needs at least one sample, got {samples}")
    layout = LayoutSpec(micro_batch_size=samples)
    return replace(
        TrainConfig.from_manifest(manifest, device, layout=layout),
        inner_steps=1,
        checkpoint_interval=1,
        round_index=step,
        schedule_offset=0,
    )
