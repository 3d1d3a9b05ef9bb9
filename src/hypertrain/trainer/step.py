"""One inner step with the "emulated layout": a fixed-order gradient reduction.

A step consumes ``B = dp_ranks * micro_batches * micro_batch_size`` samples. Rank ``r``,
micro-batch ``m`` gets rows ``[(r*M + m) * b, (r*M + m + 1) * b)`` of the step's batch.
Each rank sums its micro-batch gradients in order m = 0, 1, ...; the island then sums
the rank gradients in order r = 0, 1, ... (left fold, never a tree or an all-reduce
whose order the library picks) and divides by ``R * M``. :func:`train_step` is
the one step every island runs: a single process (or an auditor) computes every rank in
turn and folds them with :func:`reduce_gradients` (``reduction.fold``, tensor by tensor);
a real multi-rank island computes its own ranks and passes its collective as
``hooks.reduce`` (distributed.py, the same fold on its shards); the bytes are the same.
Then: global-norm clipping and the optimizer update (optim.py).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from hypertrain.protocol.manifest import InnerOptimSpec, LayoutSpec, ModelSpec
from hypertrain.trainer.model import MoEFn, loss_fn, param_shapes
from hypertrain.trainer.moe import moe_ffn
from hypertrain.trainer.optim import clip_grads, optimizer_step
from hypertrain.trainer.reduction import fold
from hypertrain.trainer.tracing import Tracer

Grads = dict[str, Tensor]


@dataclass(frozen=True, slots=True)
class StepStats:
    loss: float  # mean over the step's micro-batches
    grad_norm: float  # before clipping


def split_batch(batch: Tensor, layout: LayoutSpec) -> list[list[Tensor]]:
    """Rows of one step's (B, L) batch as ``[rank][micro_batch] -> (b, L)``."""
    b, m = layout.micro_batch_size, layout.micro_batches
    return [
        [batch[(r * m + i) * b : (r * m + i + 1) * b] for i in range(m)]
        for r in range(layout.dp_ranks)
    ]


def reduce_gradients(rank_grads: Sequence[Grads], count: int) -> Grads:
    """Left-fold sum of per-rank gradients in rank order, divided by ``count`` micro-batches.

    Accumulates into (and returns) rank 0's tensors: callers hand over fresh gradients."""
    out = dict(rank_grads[0])
    for name, g in out.items():
        fold(g, (grads[name] for grads in rank_grads[1:]), count)
    return out


@dataclass(frozen=True, slots=True)
class Section:
    """Where a step is about to go: the game's section name (``mb<k>.layers.0``,
    ``mb<k>.backward``, ``update``), the rank's index among this process's ranks and the
    micro-batch's index within the rank."""

    name: str
    rank: int = 0
    micro_batch: int = 0


class Reduction(Protocol):
    """Per-rank gradient sums (this process's ranks, in rank order) -> the island's mean."""

    def __call__(self, rank_grads: Sequence[Grads], count: int, /) -> Grads: ...


class Update(Protocol):
    """The optimizer on the reduced (clipped) gradients; updates ``tensors`` in place."""

    def __call__(
        self,
        tensors: MutableMapping[str, Tensor],
        grads: Grads,
        step: int,
        inner: InnerOptimSpec,
        /,
        *,
        schedule_step: int | None,
    ) -> None: ...


def _no_section(section: Section) -> None:
    """Honest, untraced steps mark no sections."""


def _own_norms(grads: Grads) -> Sequence[Tensor] | None:
    return None  # each tensor's norm is its own: clip_grads takes them


def _local_losses(losses: Sequence[float]) -> float:
    return sum(losses)


@dataclass(frozen=True, slots=True)
class StepHooks:
    """What one step may be run with; the defaults are the single-process island.

    ``enter`` is told each section before its operations run (the dispute trace);
    ``tracer`` records each layer's output; ``moe_fn`` computes the MoE feed-forward
    (expert parallelism dispatches it); ``ranks`` are the data-parallel ranks this
    process computes (default: all); ``params`` the parameters it differentiates
    (default: all); ``reduce`` turns their gradients into the island's mean, ``norms``
    gives each reduced tensor's norm when a process holds only part of it, ``update``
    applies the optimizer, and ``losses`` sums the ranks' losses over the island."""

    enter: Callable[[Section], None] = _no_section
    tracer: Tracer | None = None
    moe_fn: MoEFn = moe_ffn
    ranks: range | None = None
    params: Sequence[str] | None = None
    reduce: Reduction = reduce_gradients
    norms: Callable[[Grads], Sequence[Tensor] | None] = _own_norms
    update: Update = optimizer_step
    losses: Callable[[Sequence[float]], float] = _local_losses


HONEST = StepHooks()


def rank_gradient(
    params: dict[str, Tensor],
    model: ModelSpec,
    micro_batches: Sequence[Tensor],
    *,
    autocast_dtype: torch.dtype | None = None,
    hooks: StepHooks = HONEST,
    rank: int = 0,
    first_mb: int = 0,
) -> tuple[Grads, float]:
    """Sum of one rank's micro-batch gradients (in order) and the sum of their losses.

    ``rank`` is the rank's index among this process's ranks, ``first_mb`` the island-wide
    index of its first micro-batch (both only name sections for ``hooks.enter``)."""
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    total: Grads = {}
    loss_sum = 0.0
    for m, batch in enumerate(micro_batches):
        device_type = batch.device.type
        ctx = (
            torch.autocast(device_type, dtype=autocast_dtype)
            if autocast_dtype is not None
            else nullcontext()
        )
        hooks.enter(Section(f"mb{first_mb + m}.layers.0", rank, m))
        with ctx:
            loss = loss_fn(leaves, model, batch, hooks.tracer, moe_fn=hooks.moe_fn)
        hooks.enter(Section(f"mb{first_mb + m}.backward", rank, m))
        grads = torch.autograd.grad(loss, list(leaves.values()), materialize_grads=True)
        loss_sum += float(loss.detach())
        for name, g in zip(leaves, grads, strict=True):
            if name in total:
                total[name].add_(g)
            else:
                total[name] = g  # autograd returns fresh tensors: take ownership
    return total, loss_sum


def train_step(
    tensors: MutableMapping[str, Tensor],
    step: int,
    batch: Tensor,
    model: ModelSpec,
    inner: InnerOptimSpec,
    layout: LayoutSpec,
    *,
    autocast_dtype: torch.dtype | None = None,
    hooks: StepHooks = HONEST,
    schedule_step: int | None = None,
) -> StepStats:
    """Run step ``step`` of this state (``schedule_step`` of the run's learning-rate
    schedule; default ``step``) on the (B, L) batch, updating ``tensors`` in place.

    Every island computes its steps here: one process, torch.distributed ranks, expert
    parallelism and the dispute trace differ only in ``hooks``."""
    names = hooks.params if hooks.params is not None else [n for n, _ in param_shapes(model)]
    params = {name: tensors[name] for name in names}
    shards = split_batch(batch, layout)
    ranks = hooks.ranks if hooks.ranks is not None else range(layout.dp_ranks)
    m = layout.micro_batches
    per_rank = [
        rank_gradient(
            params, model, shards[r], autocast_dtype=autocast_dtype, hooks=hooks, rank=k,
            first_mb=r * m,
        )
        for k, r in enumerate(ranks)
    ]  # fmt: skip
    count = layout.dp_ranks * m
    hooks.enter(Section("update"))
    grads = hooks.reduce([g for g, _ in per_rank], count)
    norm = clip_grads(grads, inner.grad_clip, hooks.norms(grads))
    hooks.update(tensors, grads, step, inner, schedule_step=schedule_step)
    return StepStats(loss=hooks.losses([loss for _, loss in per_rank]) / count, grad_norm=norm)
