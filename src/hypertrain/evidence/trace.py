"""Operation traces of one training step, grouped in the sections the game names.

:func:`traced_step` runs exactly :func:`hypertrain.trainer.step.train_step` (the same
calls in the same order, so the same bytes: tests compare the resulting states) under
a ``TorchDispatchMode`` that records, for every aten operation, an
:class:`~hypertrain.dispute.messages.OpEntry`: its name, its non-tensor arguments as
canonical JSON (tensors appear as ``{"$t": i}``) and the digests of its tensor inputs
and outputs. Operations fall into the sections of
:func:`hypertrain.dispute.game.section_names`: per micro-batch the forward of each
layer (the embedding joins layer 0), the final norm and head (``logits``), the loss,
the backward (with the gradient accumulation), then the ``update`` (reduction,
clipping, optimizer). A section's digest is the SHA-256 of its entries' canonical JSON.

``perturb`` (tests and honeypots only) adds a small constant to the first floating
output of one operation, so an island whose arithmetic differs in exactly one place
can be built and pinned by the game.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import MutableMapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from hypertrain.dispute.game import section_names
from hypertrain.dispute.messages import OpEntry, SectionDigest
from hypertrain.protocol.manifest import InnerOptimSpec, LayoutSpec, ModelSpec
from hypertrain.trainer.model import loss_fn, param_shapes
from hypertrain.trainer.optim import clip_grads, optimizer_step
from hypertrain.trainer.step import Grads, reduce_gradients, split_batch
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


class _OpTrace(TorchDispatchMode):  # type: ignore[no-untyped-call]
    def __init__(
        self, names: tuple[str, ...], capture: OpRef | None, perturb: OpRef | None
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.trace = StepTrace(names, [[] for _ in names])
        self.section = 0
        self._capture = (capture.section, capture.index) if capture else None
        self._perturb = (perturb.section, perturb.index) if perturb else None

    def enter(self, name: str) -> None:
        self.section = self.trace.names.index(name)

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
        if where == self._perturb:
            first = next(t for t in leaves if t.is_floating_point())
            first.add_(1e-3)
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
    perturb: OpRef | None = None,
    schedule_step: int | None = None,
) -> StepTrace:
    """``train_step`` under the operation tracer; updates ``tensors`` in place."""
    count = layout.dp_ranks * layout.micro_batches
    mode = _OpTrace(section_names(model.num_layers, count), capture, perturb)
    params = {name: tensors[name] for name, _ in param_shapes(model)}
    with mode:
        per_rank = [
            _rank_gradient(mode, r * layout.micro_batches, params, model, mbs, autocast_dtype)
            for r, mbs in enumerate(split_batch(batch, layout))
        ]
        mode.enter("update")
        grads = reduce_gradients(per_rank, count)
        clip_grads(grads, inner.grad_clip)
        optimizer_step(tensors, grads, step, inner, schedule_step=schedule_step)
    return mode.trace


def _rank_gradient(
    mode: _OpTrace,
    first_mb: int,
    params: dict[str, Tensor],
    model: ModelSpec,
    micro_batches: Sequence[Tensor],
    autocast_dtype: torch.dtype | None,
) -> Grads:
    """Mirror of ``trainer.step.rank_gradient`` with section markers."""
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    total: Grads = {}
    for m, batch in enumerate(micro_batches):
        prefix = f"mb{first_mb + m}."
        ctx = (
            torch.autocast(batch.device.type, dtype=autocast_dtype)
            if autocast_dtype is not None
            else nullcontext()
        )
        mode.enter(prefix + "layers.0")
        with ctx:
            loss = loss_fn(leaves, model, batch, mode)  # type: ignore[arg-type]
        mode.enter(prefix + "backward")
        grads = torch.autograd.grad(loss, list(leaves.values()), materialize_grads=True)
        float(loss.detach())
        for name, g in zip(leaves, grads, strict=True):
            if name in total:
                total[name].add_(g)
            else:
                total[name] = g
    return total
