"""One inner step with the "emulated layout": a fixed-order gradient reduction.

A step consumes ``B = dp_ranks * micro_batches * micro_batch_size`` samples. Rank ``r``,
micro-batch ``m`` gets rows ``[(r*M + m) * b, (r*M + m + 1) * b)`` of the step's batch.
Each rank sums its micro-batch gradients in order m = 0, 1, ...; the island then sums
the rank gradients in order r = 0, 1, ... (left fold, never a tree or an all-reduce
whose order the library picks) and divides by ``R * M``. A real multi-rank island
calls :func:`rank_gradient` on each rank, gathers, and calls :func:`reduce_gradients`;
a single process (or an auditor) calls them in turn; the bytes are the same.
Then: global-norm clipping and the optimizer update (optim.py).
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import Tensor

from hypertrain.protocol.manifest import InnerOptimSpec, LayoutSpec, ModelSpec
from hypertrain.trainer.model import loss_fn, param_shapes
from hypertrain.trainer.optim import clip_grads, optimizer_step
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


def rank_gradient(
    params: dict[str, Tensor],
    model: ModelSpec,
    micro_batches: Sequence[Tensor],
    *,
    autocast_dtype: torch.dtype | None = None,
    tracer: Tracer | None = None,
) -> tuple[Grads, float]:
    """Sum of one rank's micro-batch gradients (in order) and the sum of their losses."""
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    total: Grads = {}
    loss_sum = 0.0
    for batch in micro_batches:
        device_type = batch.device.type
        ctx = (
            torch.autocast(device_type, dtype=autocast_dtype)
            if autocast_dtype is not None
            else nullcontext()
        )
        with ctx:
            loss = loss_fn(leaves, model, batch, tracer)
        grads = torch.autograd.grad(loss, list(leaves.values()), materialize_grads=True)
        loss_sum += float(loss.detach())
        for name, g in zip(leaves, grads, strict=True):
            if name in total:
                total[name].add_(g)
            else:
                total[name] = g  # autograd returns fresh tensors: take ownership
    return total, loss_sum


def reduce_gradients(rank_grads: Sequence[Grads], count: int) -> Grads:
    """Left-fold sum of per-rank gradients in rank order, divided by ``count`` micro-batches.

    Accumulates into (and returns) rank 0's tensors: callers hand over fresh gradients."""
    out = dict(rank_grads[0])
    for grads in rank_grads[1:]:
        for name, g in grads.items():
            out[name].add_(g)
    for g in out.values():
        g.div_(count)
    return out


def train_step(
    tensors: MutableMapping[str, Tensor],
    step: int,
    batch: Tensor,
    model: ModelSpec,
    inner: InnerOptimSpec,
    layout: LayoutSpec,
    *,
    autocast_dtype: torch.dtype | None = None,
    tracer: Tracer | None = None,
    schedule_step: int | None = None,
) -> StepStats:
    """Run step ``step`` of this state (``schedule_step`` of the run's learning-rate
    schedule; default ``step``) on the (B, L) batch, updating ``tensors`` in place."""
    params = {name: tensors[name] for name, _ in param_shapes(model)}
    per_rank = [
        rank_gradient(params, model, mbs, autocast_dtype=autocast_dtype, tracer=tracer)
        for mbs in split_batch(batch, layout)
    ]
    count = layout.dp_ranks * layout.micro_batches
    grads = reduce_gradients([g for g, _ in per_rank], count)
    norm = clip_grads(grads, inner.grad_clip)
    optimizer_step(tensors, grads, step, inner, schedule_step=schedule_step)
    return StepStats(loss=sum(loss for _, loss in per_rank) / count, grad_norm=norm)
