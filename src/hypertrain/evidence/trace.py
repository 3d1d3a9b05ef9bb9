"""Operation traces of one training step, grouped in the sections the game names.

:func:`traced_step` runs :func:`hypertrain.trainer.step.train_step` itself (its section
hook names the sections, so the bytes are the step's: tests compare the states) under
a ``TorchDispatchMode`` that records, for every aten operation, an
:class:`~hypertrain.dispute.messages.OpEntry`: its name, its non-tensor arguments as
canonical JSON (tensors appear as ``{"$t": i}``) and the digests of its tensor inputs
and outputs. Operations fall into the sections of
:func:`hypertrain.dispute.game.section_names`: per micro-batch the forward of each
layer (the embedding joins layer 0), the final norm and head (``logits``), the loss,
the backward (with the gradient accumulation), then the ``update`` (reduction,
clipping, optimizer). A section's digest is the SHA-256 of its entries' canonical JSON.

``on_op`` (an :class:`OpHook`) sees each operation's outputs before they are hashed;
production parties pass none. Tests and the operator's honeypots pass one that
changes one operation's output, so an island whose arithmetic differs in exactly one
place can be built and pinned by the game.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from hypertrain.dispute.game import section_names
from hypertrain.dispute.messages import OpEntry, SectionDigest
from hypertrain.protocol.manifest import InnerOptimSpec, LayoutSpec, ModelSpec
from hypertrain.trainer.segment import Sample, TrainConfig, samples_to_batch
from hypertrain.trainer.state import TrainState
from hypertrain.trainer.step import Section, StepHooks, StepStats, train_step
from hypertrain.trainer.tracing import tensor_digest


@dataclass(frozen=True, slots=True)
class OpRef:
    """One operation of one step: the step's offset in its segment, section, index."""

    step: int
    section: int
    index: int


@dataclass
class StepTrace:
    names: tuple[str, ...]
    ops: list[list[OpEntry]]
    captured: list[Tensor] | None = None  # inputs of the ``capture`` operation
    stats: StepStats | None = None  # the step's loss and gradient norm

    def sections(self) -> list[SectionDigest]:
        return [
            SectionDigest(name=n, digest=section_digest(o))
            for n, o in zip(self.names, self.ops, strict=True)
        ]


def section_digest(ops: Sequence[OpEntry]) -> str:
    h = hashlib.sha256()
    for entry in ops:
        h.update(entry.model_dump_json().encode())
        h.update(b"\n")
    return h.hexdigest()


def encode_args(args: Any, kwargs: Any) -> tuple[str, list[Tensor]]:
    """Canonical JSON of an operation's arguments and the tensors they reference, in order."""
    tensors: list[Tensor] = []

    def enc(x: Any) -> Any:
        if isinstance(x, Tensor):
            tensors.append(x)
            return {"$t": len(tensors) - 1}
        if x is None or isinstance(x, bool | int | str):
            return x
        if isinstance(x, float):
            return x if math.isfinite(x) else {"$f": repr(x)}
        if isinstance(x, list | tuple):
            return [enc(v) for v in x]
        if isinstance(x, dict):
            return {str(k): enc(v) for k, v in sorted(x.items())}
        for kind in (torch.dtype, torch.device, torch.layout, torch.memory_format):
            if isinstance(x, kind):
                return {"$" + kind.__name__: str(x)}
        return {"$repr": repr(x)}

    doc = [enc(list(args)), enc(dict(kwargs or {}))]
    return json.dumps(doc, sort_keys=True, separators=(",", ":")), tensors


class OpHook(Protocol):
    """Called with each traced operation's place (section, index) and its tensor outputs,
    before they are hashed: a party's observer of its own arithmetic."""

    def __call__(self, section: int, index: int, outputs: Sequence[Tensor], /) -> None: ...


class _OpTrace(TorchDispatchMode):  # type: ignore[no-untyped-call]
    def __init__(self, names: tuple[str, ...], capture: OpRef | None, on_op: OpHook | None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.trace = StepTrace(names, [[] for _ in names])
        self.section = 0
        self._capture = (capture.section, capture.index) if capture else None
        self._on_op = on_op

    def enter(self, section: Section) -> None:
        self.section = self.trace.names.index(section.name)

    def record(self, name: str, tensor: Tensor) -> None:
        """The model's per-layer hook: the next operations belong to the next section."""
        self.section += 1

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        spec, inputs = encode_args(args, kwargs)
        entries = self.trace.ops[self.section]
        where = (self.section, len(entries))
        if where == self._capture:
            self.trace.captured = [t.detach().clone() for t in inputs]
        in_digests = [tensor_digest(t) for t in inputs]
        out = func(*args, **(kwargs or {}))
        leaves = [x for x in tree_flatten(out)[0] if isinstance(x, Tensor)]
        if self._on_op is not None:
            self._on_op(*where, leaves)
        entries.append(
            OpEntry(
                op=str(func),
                args=spec,
                inputs=in_digests,
                outputs=[tensor_digest(t) for t in leaves],
            )
        )
        return out


def traced_step(
    tensors: MutableMapping[str, Tensor],
    step: int,
    batch: Tensor,
    model: ModelSpec,
    inner: InnerOptimSpec,
    layout: LayoutSpec,
    *,
    autocast_dtype: torch.dtype | None = None,
    capture: OpRef | None = None,
    on_op: OpHook | None = None,
    schedule_step: int | None = None,
) -> StepTrace:
    """``train_step`` itself, run under the operation tracer; updates ``tensors`` in place."""
    count = layout.dp_ranks * layout.micro_batches
    mode = _OpTrace(section_names(model.num_layers, count), capture, on_op)
    hooks = StepHooks(enter=mode.enter, tracer=mode)  # type: ignore[arg-type]
    with mode:
        mode.trace.stats = train_step(
            tensors, step, batch, model, inner, layout,
            autocast_dtype=autocast_dtype, hooks=hooks, schedule_step=schedule_step,
        )  # fmt: skip
    return mode.trace


def traced_state_step(
    state: TrainState,
    config: TrainConfig,
    samples: Sequence[Sample],
    local_step: int,
    *,
    capture: OpRef | None = None,
    on_op: OpHook | None = None,
) -> tuple[TrainState, StepTrace]:
    """One step of ``state`` (at ``local_step`` of its round) on its samples, traced."""
    tensors = {k: v.clone() for k, v in state.tensors.items()}
    trace = traced_step(
        tensors,
        state.step,
        samples_to_batch(samples, config),
        config.model,
        config.inner,
        config.layout,
        autocast_dtype=torch.bfloat16 if config.dtype == "bfloat16" else None,
        capture=capture,
        on_op=on_op,
        schedule_step=config.schedule_step(local_step),
    )
    return TrainState(state.step + 1, tensors, state.config_digest), trace
