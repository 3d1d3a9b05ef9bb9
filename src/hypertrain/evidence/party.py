"""A party's side of the game: answer every query from a segment's start state.

:class:`SegmentParty` holds what a replay of one segment needs (the verified start
state, the island's config and the segment's samples) and answers the current query
of a :class:`~hypertrain.dispute.game.Game`: state hashes after the asked steps, the
section digests of the disputed step, the operation entries of one section, and the
input tensors of the contested operation in the :mod:`~hypertrain.dispute.opinputs`
layout. Islands answer from their stored checkpoints, auditors from the checkpoint
they replayed; both compute with the same code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from hypertrain.dispute import opinputs
from hypertrain.dispute.game import Game
from hypertrain.dispute.messages import DisputeAnswer
from hypertrain.evidence.trace import OpHook, OpRef, StepTrace, traced_state_step
from hypertrain.trainer.segment import Sample, TrainConfig, run_segment
from hypertrain.trainer.state import TrainState


def honest_ops(step: int) -> OpHook | None:
    """The production party traces every step without touching an operation."""
    return None


@dataclass
class SegmentParty:
    start: TrainState
    config: TrainConfig
    samples: Sequence[Sample]  # the segment's samples, J steps of them
    first_step: int = 0  # the segment's first local step in its round (segment x J)
    # The operation hook of each step (by the state's step counter). A step with one is
    # computed traced, in training as in answers; the honest party has none.
    op_hooks: Callable[[int], OpHook | None] = honest_ops
    reveals: dict[int, DisputeAnswer] = field(default_factory=dict)  # committed, by query
    _hashes: dict[int, str] = field(default_factory=dict)
    _traces: dict[int, StepTrace] = field(default_factory=dict)

    def _chunk(self, step: int, steps: int = 1) -> Sequence[Sample]:
        per = self.config.samples_per_step
        return self.samples[step * per : (step + steps) * per]

    def _hooked(self, step: int) -> OpHook | None:
        return self.op_hooks(self.start.step + step)

    def state_after(self, steps: int) -> TrainState:
        """The state after the first ``steps`` steps of the segment."""
        state, done = self.start, 0
        while done < steps:
            hook = self._hooked(done)
            if hook is not None:
                state = traced_state_step(
                    state, self.config, self._chunk(done), self.first_step + done, on_op=hook
                )[0]
                done += 1
                continue
            run = next((i for i in range(done, steps) if self._hooked(i) is not None), steps)
            state = run_segment(
                state, self.config, self._chunk(done, run - done), run - done,
                local_step=self.first_step + done,
            )  # fmt: skip
            done = run
        return state

    def state_hashes(self, points: Sequence[int]) -> list[str]:
        """Hex state hashes after the given steps; the first call replays the segment once."""
        if not self._hashes:
            self._replay_all()
        return [self._hashes[p] for p in points]

    def _replay_all(self) -> None:
        state = self.start
        self._hashes[0] = state.state_hash().hex()
        for i in range(len(self.samples) // self.config.samples_per_step):  # J steps
            hook = self._hooked(i)
            if hook is not None:
                local = self.first_step + i
                state = traced_state_step(state, self.config, self._chunk(i), local, on_op=hook)[0]
            else:
                state = run_segment(
                    state, self.config, self._chunk(i), 1, local_step=self.first_step + i
                )
            self._hashes[i + 1] = state.state_hash().hex()

    def trace(self, step: int, capture: OpRef | None = None) -> StepTrace:
        """The operation trace of the segment's step ``step`` (0-based)."""
        if capture is None and step in self._traces:
            return self._traces[step]
        before = self.state_after(step)
        _, traced = traced_state_step(
            before, self.config, self._chunk(step), self.first_step + step,
            capture=capture, on_op=self._hooked(step),
        )  # fmt: skip
        if capture is None:
            self._traces = {step: traced}  # the game traces one step; keep only that one
        return traced

    def answer(self, game: Game) -> DisputeAnswer:
        """This party's answer to the game's open query."""
        base = {"dispute_id": game.dispute_id, "query": game.query, "segment": game.segment}
        if game.stage == "step":
            return DisputeAnswer(level="step", hashes=self.state_hashes(game.points), **base)
        assert game.step is not None
        trace = self.trace(game.step)
        if game.stage == "layer":
            return DisputeAnswer(level="layer", step=game.step, sections=trace.sections(), **base)
        assert game.stage == "op" and game.section is not None
        return DisputeAnswer(
            level="op",
            step=game.step,
            section=game.section,
            ops=trace.ops[game.section],
            **base,
        )

    def op_inputs(self, game: Game) -> bytes:
        """The contested operation's input tensors, in the ``opinputs`` layout."""
        assert game.step is not None and game.section is not None and game.op_index is not None
        return self.op_inputs_at(OpRef(game.step, game.section, game.op_index))

    def op_inputs_at(self, where: OpRef) -> bytes:
        trace = self.trace(where.step, where)
        if trace.captured is None:
            raise IndexError(
                f"step {where.step} has no operation {where.index} in section {where.section}"
            )
        return opinputs.encode([raw_tensor(t) for t in trace.captured])


def raw_tensor(t: Tensor) -> opinputs.RawTensor:
    """The ``opinputs`` form of a tensor; its digest is ``tensor_digest(t)``."""
    c = t.detach().cpu().contiguous()
    view = c.view(torch.int16) if c.dtype == torch.bfloat16 else c
    return opinputs.RawTensor(str(t.dtype), tuple(t.shape), view.numpy().tobytes())
