"""The hooks a miner's round is computed with, honest by default.

Each field of :class:`RoundHooks` is one place where a round's bytes are made: the
samples loaded for the assigned ids, each training step, the update built from the
final state, and the operation hooks of the island's dispute answers. The production
miner uses :data:`HONEST` in every round. Other hooks come only from code that calls
:func:`hypertrain.miner.cli.main` with its own :data:`HooksFor` (the operator's
tooling); nothing rebinds the miner's functions, and the miner itself has no switch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from torch import Tensor

from hypertrain.data import Dataset
from hypertrain.evidence.inputs import load_samples
from hypertrain.evidence.party import honest_ops
from hypertrain.evidence.trace import OpHook
from hypertrain.protocol.manifest import CompressionSpec
from hypertrain.trainer.segment import Sample, StepRunner, one_step
from hypertrain.trainer.state import TrainState
from hypertrain.trainer.update import EncodedUpdate, build_update

SampleLoader = Callable[[Dataset, Sequence[int]], list[Sample]]
UpdateBuilder = Callable[[Mapping[str, Tensor], TrainState, CompressionSpec], EncodedUpdate]
OpHooks = Callable[[int], OpHook | None]  # the state's step counter -> its op hook


@dataclass(frozen=True, slots=True)
class RoundHooks:
    """What one round is computed with (see the module docstring).

    ``one_process`` refuses to start torch.distributed ranks (hooks that change the
    step run only in the miner's own process); ``event`` and ``details``, when set, are
    reported once at the round's start."""

    samples: SampleLoader = load_samples
    step: StepRunner = one_step
    update: UpdateBuilder = build_update
    ops: OpHooks = honest_ops
    one_process: bool = False
    event: str | None = None
    details: Mapping[str, str | int | bool] = field(default_factory=dict)

    @property
    def in_process_only(self) -> bool:
        return self.one_process or self.step is not one_step


HONEST = RoundHooks()
HooksFor = Callable[[int], RoundHooks]  # round index -> the round's hooks


def honest(round_index: int) -> RoundHooks:
    """The production miner's hooks in every round."""
    return HONEST
