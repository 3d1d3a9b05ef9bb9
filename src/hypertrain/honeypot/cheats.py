"""The cheats of the operator's honeypot islands, and how they get into a real miner.

Each strategy breaks a round in a way only byte comparison can reveal, so a devnet or
test can prove the audits work:

* ``wrong-samples``: train on other (valid, root-verified) samples than assigned.
* ``skip-steps``: skip the last step of every segment (``J - 1`` steps per segment).
* ``bad-update``: train honestly but upload an update that is not the compressed
  delta of the final state (the delta is taken against scaled start parameters).

The production miner carries no switch for any of this: its round takes explicit
hooks (:class:`~hypertrain.miner.hooks.RoundHooks`, honest by default), and
:func:`hooks_for` supplies hooks that cheat from round ``honest_rounds`` on: before
that the island is honest and builds escrow, so a caught fault shows what it costs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from torch import Tensor

from hypertrain.data import Dataset
from hypertrain.evidence.inputs import load_samples
from hypertrain.miner.hooks import HooksFor, RoundHooks
from hypertrain.protocol.manifest import CompressionSpec
from hypertrain.trainer.segment import Sample, StepRunner, TrainConfig, one_step
from hypertrain.trainer.state import TrainState
from hypertrain.trainer.step import StepStats
from hypertrain.trainer.update import EncodedUpdate, build_update

Strategy = Literal["wrong-samples", "skip-steps", "bad-update"]
STRATEGIES: Final[tuple[Strategy, ...]] = ("wrong-samples", "skip-steps", "bad-update")
START_SKEW: Final = 1.01  # bad-update: the factor on the start parameters of the delta


def check_strategy(name: str) -> Strategy:
    for strategy in STRATEGIES:
        if name == strategy:
            return strategy
    raise ValueError(f"unknown honeypot strategy {name!r}; choose from {', '.join(STRATEGIES)}")


def wrong_ids(ids: Sequence[int], sample_count: int) -> list[int]:
    """``wrong-samples``: the ids trained instead of the assigned ones."""
    return [(i + 1) % sample_count for i in ids]


def skipped(local_step: int, interval: int) -> bool:
    """``skip-steps``: whether the step is left out (the last of each segment)."""
    return local_step % interval == interval - 1


def tamper_start(start: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """``bad-update``: the start parameters the uploaded delta is computed against."""
    return {name: t * START_SKEW for name, t in start.items()}


@dataclass(frozen=True, slots=True)
class Schedule:
    """Honest in rounds ``0 .. honest_rounds - 1``, then ``strategy`` in every round."""

    strategy: Strategy
    honest_rounds: int = 0

    def __post_init__(self) -> None:
        if self.honest_rounds < 0:
            raise ValueError(f"honest rounds must be >= 0, got {self.honest_rounds}")

    def cheats(self, round_index: int) -> bool:
        return round_index >= self.honest_rounds


def skipping_step(honest: StepRunner = one_step) -> StepRunner:
    """``skip-steps``: the step leaves the state unchanged at the last step of each segment
    (and reports the previous step's loss, so every step still reports)."""
    last_loss = [0.0]

    def step(
        state: TrainState, config: TrainConfig, samples: Sequence[Sample], local_step: int, /
    ) -> tuple[TrainState, StepStats]:
        if skipped(local_step, config.checkpoint_interval):
            return state, StepStats(loss=last_loss[0], grad_norm=0.0)
        state, stats = honest(state, config, samples, local_step)
        last_loss[0] = stats.loss
        return state, stats

    return step


def _wrong_samples(dataset: Dataset, ids: Sequence[int]) -> list[Sample]:
    return load_samples(dataset, wrong_ids(ids, dataset.sample_count))


def _bad_update(
    start: Mapping[str, Tensor], end: TrainState, compression: CompressionSpec
) -> EncodedUpdate:
    return build_update(tamper_start(start), end, compression)


def round_hooks(schedule: Schedule, round_index: int) -> RoundHooks:
    """The hooks of round ``round_index`` under ``schedule``: honest rounds compute
    honestly; every round trains in one process."""
    cheats = schedule.cheats(round_index)
    base = RoundHooks(
        one_process=True,
        event="honeypot",
        details={"strategy": schedule.strategy, "cheats": cheats},
    )
    if not cheats:
        return base
    if schedule.strategy == "wrong-samples":
        return dataclasses.replace(base, samples=_wrong_samples)
    if schedule.strategy == "skip-steps":
        return dataclasses.replace(base, step=skipping_step())
    return dataclasses.replace(base, update=_bad_update)


def hooks_for(schedule: Schedule) -> HooksFor:
    """The miner's :data:`~hypertrain.miner.hooks.HooksFor` that follows ``schedule``."""

    def hooks(round_index: int) -> RoundHooks:
        return round_hooks(schedule, round_index)

    return hooks
