"""The data-parallel warm start: the steps a manifest's ``warm_start`` trains before round 0.

One model takes ``warm_start.steps`` steps of the run's inner optimizer, each on
``warm_start.samples_per_step`` samples (the global batch a data-parallel cluster would
step on), from the seed's initial state, at the schedule's global steps 0, 1, ... The
parameters it ends with are round 0's start model; round ``r`` then trains at global
steps ``steps + r * H + i`` (``TrainConfig.schedule_offset``). The loop is the parity
harness's data-parallel arm too, so the baseline and the product share one implementation.

Like every other step it is a pure function of public inputs (the manifest and the
samples in order), so anyone holding the dataset can replay it and compare the genesis
model's hash (``hypertrain run warm-start --expect-sha256``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer.errors import SampleError
from hypertrain.trainer.round_config import (
    WarmStartError,
    data_parallel_config,
    warm_start_config,
)
from hypertrain.trainer.segment import Sample, run_segment
from hypertrain.trainer.state import TrainState, init_state


def initial_state(manifest: RunManifest) -> TrainState:
    """The seed's initial state in the warm start's layout (step 0, zero moments)."""
    return init_state(warm_start_config(manifest, 0).state_config(), manifest.seed)


def iter_warm_start(
    manifest: RunManifest,
    batches: Iterable[Sequence[Sample]],
    *,
    start: TrainState | None = None,
    device: str = "cpu",
) -> Iterator[TrainState]:
    """The state after each warm-start step, one batch per step in order (``start``:
    the state to continue from, default :func:`initial_state`)."""
    state = initial_state(manifest) if start is None else start
    steps = _in_warm_start(manifest, batches, state.step)
    yield from iter_data_parallel(manifest, steps, state, device=device)


def _in_warm_start(
    manifest: RunManifest, batches: Iterable[Sequence[Sample]], first: int
) -> Iterator[Sequence[Sample]]:
    """The batches, each refused (``WarmStartError``) outside the manifest's warm start."""
    for step, batch in enumerate(batches, first):
        per_step = warm_start_config(manifest, step).samples_per_step
        if len(batch) != per_step:
            raise SampleError(f"warm-start step {step} needs {per_step} samples, got {len(batch)}")
        yield batch


def iter_data_parallel(
    manifest: RunManifest,
    batches: Iterable[Sequence[Sample]],
    start: TrainState,
    *,
    device: str = "cpu",
) -> Iterator[TrainState]:
    """The state after each data-parallel step from ``start``, one batch (of any size) per
    step at the schedule's global step ``state.step``: the warm start continued through a
    whole run's steps, the baseline a run is measured against (``devnet.baseline``)."""
    state = start
    for batch in batches:
        config = data_parallel_config(manifest, state.step, len(batch), device=device)
        state = run_segment(state, config, batch, 1)
        yield state


def run_data_parallel(
    manifest: RunManifest,
    batches: Iterable[Sequence[Sample]],
    start: TrainState,
    *,
    device: str = "cpu",
) -> TrainState:
    """Every step of :func:`iter_data_parallel`; the end state (``start`` for no batch)."""
    end = start
    for end in iter_data_parallel(manifest, batches, start, device=device):  # noqa: B007
        continue
    return end


def run_warm_start(
    manifest: RunManifest, batches: Iterable[Sequence[Sample]], *, device: str = "cpu"
) -> TrainState:
    """Every warm-start step; the end state (its parameters are round 0's model)."""
    state = None
    for state in iter_warm_start(manifest, batches, device=device):  # noqa: B007
        continue
    steps = manifest.first_round_step
    if state is None or state.step != steps:
        done = 0 if state is None else state.step
        raise WarmStartError(f"the warm start has {steps} steps, {done} batches were given")
    return state
