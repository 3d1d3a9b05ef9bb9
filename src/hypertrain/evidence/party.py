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

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from hypertrain.dispute import opinputs
from hypertrain.dispute.game import Game
from hypertrain.dispute.messages import DisputeAnswer
from hypertrain.evidence.trace import OpRef, StepTrace, traced_step
from hypertrain.trainer.segment import Sample, TrainConfig, run_segment, samples_to_batch
from hypertrain.trainer.state import TrainState


@dataclass
class SegmentParty:
    start: TrainState
    config: TrainConfig
    samples: Sequence[Sample]  # the segment's samples, J steps of them
    perturb: OpRef | None = None  # tests and honeypots only: see ``trace``
    first_step: int = 0  # the segment's first local step in its round (segment x J)
    _hashes: dict[int, str] = field(default_factory=dict)
    _traces: dict[int, StepTrace] = field(default_factory=dict)

    def state_after(self, steps: int) -> TrainState:
        """The state after the first ``steps`` steps of the segment."""
        per = self.config.samples_per_step
        if self.perturb is None or self.perturb.step >= steps:
            return run_segment(
                self.start, self.config, self.samples[: steps * per], steps,
                local_step=self.first_step,
            )  # fmt: skip
        before = self.state_after(self.perturb.step)
        tensors = {k: v.clone() for k, v in before.tensors.items()}
        self._trace_into(tensors, self.perturb.step, capture=None)
        after = TrainState(before.step + 1, tensors, before.config_digest)
        rest = steps - self.perturb.step - 1
        chunk = self.samples[(self.perturb.step + 1) * per : steps * per]
        return run_segment(
            after, self.config, chunk, rest, local_step=self.first_step + self.perturb.step + 1
        )

    def state_hashes(self, points: Sequence[int]) -> list[str]:
        """Hex state hashes after the given steps; the first call replays the segment once."""
        if not self._hashes:
            self._replay_all()
        return [self._hashes[p] for p in points]

    def _replay_all(self) -> None:
        per, state = self.config.samples_per_step, self.start
        self._hashes[0] = state.state_hash().hex()
        for i in range(len(self.samples) // per):  # J steps
            if self.perturb is not None and self.perturb.step == i:
                state = self.state_after(i + 1)
            else:
                chunk = self.samples[i * per : (i + 1) * per]
                state = run_segment(state, self.config, chunk, 1, local_step=self.first_step + i)
            self._hashes[i + 1] = state.state_hash().hex()

    def trace(self, step: int, capture: OpRef | None = None) -> StepTrace:
        """The operation trace of the segment's step ``step`` (0-based)."""
        if capture is None and step in self._traces:
            return self._traces[step]
        before = self.state_after(step)
        tensors = {k: v.clone() for k, v in before.tensors.items()}
        traced = self._trace_into(tensors, step, capture)
        if capture is None:
            self._traces = {step: traced}  # the game traces one step; keep only that one
        return traced

    def _trace_into(
        self, tensors: dict[str, Tensor], step: int, capture: OpRef | None
    ) -> StepTrace:
        per = self.config.samples_per_step
        rows = samples_to_batch(self.samples[step * per : (step + 1) * per], self.config)
        autocast = torch.bfloat16 if self.config.dtype == "bfloat16" else None
        perturb = self.perturb if self.perturb is not None and self.perturb.step == step else None
        return traced_step(
            tensors,
            self.start.step + step,
            rows,
            self.config.model,
            self.config.inner,
            self.config.layout,
            autocast_dtype=autocast,
            capture=capture,
            perturb=perturb,
            schedule_step=self.config.schedule_step(self.first_step + step),
        )

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
