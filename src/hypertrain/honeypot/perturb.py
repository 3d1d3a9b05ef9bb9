"""The perturbation of one operation: a party whose arithmetic differs in one place.

:class:`Nudge` is an :class:`~hypertrain.evidence.trace.OpHook` that adds a small
constant to the first floating output of one operation of a traced step. Tests, the
dispute benchmark and the honeypot island hand it to a party (``op_hooks``) and to the
miner's step (:func:`perturbed_step`), so an island can be built that disputes an honest
verdict which the game must uphold, pinned to that step, section and operation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from torch import Tensor

from hypertrain.evidence.trace import OpHook, OpRef, traced_state_step
from hypertrain.trainer.segment import Sample, StepRunner, TrainConfig, one_step
from hypertrain.trainer.state import TrainState
from hypertrain.trainer.step import StepStats

NUDGE: Final = 1e-3


@dataclass(frozen=True, slots=True)
class Nudge:
    """Adds :data:`NUDGE` to the first floating output of operation ``index`` of ``section``."""

    section: int
    index: int

    def __call__(self, section: int, index: int, outputs: Sequence[Tensor], /) -> None:
        if (section, index) == (self.section, self.index):
            first = next(t for t in outputs if t.is_floating_point())
            first.add_(NUDGE)


def perturbed_ops(global_step: int, where: OpRef) -> Callable[[int], OpHook | None]:
    """A party's op hooks: nudge ``where`` in the step whose state counter is ``global_step``."""
    hook = Nudge(where.section, where.index)

    def ops(step: int) -> OpHook | None:
        return hook if step == global_step else None

    return ops


def perturbed_step(global_step: int, where: OpRef, honest: StepRunner = one_step) -> StepRunner:
    """The miner's step with ``where`` nudged at ``global_step`` (traced there, as the
    party answers), ``honest`` elsewhere."""
    hook = Nudge(where.section, where.index)

    def step(
        state: TrainState, config: TrainConfig, samples: Sequence[Sample], local_step: int, /
    ) -> tuple[TrainState, StepStats]:
        if state.step != global_step:
            return honest(state, config, samples, local_step)
        after, trace = traced_state_step(state, config, samples, local_step, on_op=hook)
        assert trace.stats is not None
        return after, trace.stats

    return step
