"""Inner optimizers as explicit tensor arithmetic, so every byte of their state is ours.

* :func:`lr_multiplier`: linear warmup then cosine decay to ``min_lr_ratio``.
* AdamW (decoupled weight decay, bias-corrected) on every tensor, or
* Muon: Nesterov momentum orthogonalised by a quintic Newton–Schulz iteration
  (Keller Jordan, 2024) on the hidden 2-D (and per-expert 3-D) weights, AdamW on the
  embedding, router and norms.

Weight decay applies to matrices only, never to norm gains. Optimizer state lives
in the same flat ``name -> tensor`` map as the parameters (``optim.<slot>.<param>``) so
the state hash covers it. Updates run tensor by tensor in the canonical order with
Python-float hyperparameters: no fused or multi-tensor kernels whose grouping could
change between versions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, MutableMapping, Sequence

import torch
from torch import Tensor

from hypertrain.protocol.manifest import InnerOptimSpec

NS_COEFFS = (3.4445, -4.7750, 2.0315)


def lr_multiplier(step: int, spec: InnerOptimSpec) -> float:
    """Schedule factor for optimizer step ``step`` (0-based, global)."""
    if step < spec.warmup_steps:
        return (step + 1) / spec.warmup_steps
    span = max(1, spec.total_steps - spec.warmup_steps)
    progress = min(1.0, (step - spec.warmup_steps) / span)
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return spec.min_lr_ratio + (1.0 - spec.min_lr_ratio) * cosine


def uses_muon(name: str, shape: tuple[int, ...], spec: InnerOptimSpec) -> bool:
    """Whether Muon (not AdamW) updates this parameter."""
    if spec.name != "muon" or len(shape) < 2:
        return False
    return not any(key in name for key in ("embed_tokens", "lm_head", "router"))


def slot_names(name: str, shape: tuple[int, ...], spec: InnerOptimSpec) -> list[str]:
    """Optimizer-state tensor names for one parameter, in canonical order."""
    if uses_muon(name, shape, spec):
        return [f"optim.momentum.{name}"]
    return [f"optim.exp_avg.{name}", f"optim.exp_avg_sq.{name}"]


def clip_grads(
    grads: MutableMapping[str, Tensor],
    max_norm: float | None,
    norms: Sequence[Tensor] | None = None,
) -> float:
    """Scale gradients in place so their global L2 norm is at most ``max_norm``; return the norm.

    ``norms``: each tensor's norm in ``grads`` order, when a caller holds only part of a
    tensor (expert parallelism takes them over the whole tensor)."""
    if norms is None:
        norms = [torch.linalg.vector_norm(g) for g in grads.values()]
    total = torch.linalg.vector_norm(torch.stack(list(norms)))
    if max_norm is not None:
        coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads.values():
            g.mul_(coef)
    return float(total)


def adamw_update(
    p: Tensor, g: Tensor, m: Tensor, v: Tensor, step: int, lr: float, spec: InnerOptimSpec
) -> None:
    """One AdamW update in place; ``step`` is 1-based for bias correction."""
    b1, b2 = spec.betas
    if p.ndim >= 2 and spec.weight_decay:
        p.mul_(1.0 - lr * spec.weight_decay)
    m.lerp_(g, 1.0 - b1)
    v.mul_(b2).addcmul_(g, g, value=1.0 - b2)
    denom = (v.sqrt() / math.sqrt(1.0 - b2**step)).add_(spec.eps)
    p.addcdiv_(m, denom, value=-lr / (1.0 - b1**step))


def newton_schulz(g: Tensor, steps: int) -> Tensor:
    """Approximately orthogonalise each trailing (rows, cols) matrix of ``g`` (batched)."""
    a, b, c = NS_COEFFS
    x = g / (torch.linalg.matrix_norm(g, keepdim=True) + 1e-7)
    tall = g.shape[-2] > g.shape[-1]
    if tall:
        x = x.mT
    for _ in range(steps):
        s = x @ x.mT
        x = a * x + (b * s + c * (s @ s)) @ x
    out: Tensor = x.mT if tall else x
    return out


def muon_update(p: Tensor, g: Tensor, buf: Tensor, lr: float, spec: InnerOptimSpec) -> None:
    """One Muon update in place (Nesterov momentum, orthogonalised, shape-scaled)."""
    buf.lerp_(g, 1.0 - spec.muon_momentum)
    nesterov = g.lerp(buf, spec.muon_momentum)
    update = newton_schulz(nesterov, spec.muon_ns_steps)
    scale = math.sqrt(max(1.0, p.shape[-2] / p.shape[-1]))
    if spec.weight_decay:
        p.mul_(1.0 - lr * spec.weight_decay)
    p.add_(update, alpha=-lr * scale)


def optimizer_step(
    tensors: MutableMapping[str, Tensor],
    grads: Mapping[str, Tensor],
    step: int,
    spec: InnerOptimSpec,
    *,
    schedule_step: int | None = None,
) -> None:
    """Apply one inner step (``step`` = steps this state has taken, for bias correction) to
    params and state in place; the learning rate follows ``schedule_step`` (the run's
    global step; default ``step``)."""
    mult = lr_multiplier(step if schedule_step is None else schedule_step, spec)
    for name, g in grads.items():
        p = tensors[name]
        shape = tuple(p.shape)
        if uses_muon(name, shape, spec):
            muon_update(p, g, tensors[f"optim.momentum.{name}"], spec.muon_lr * mult, spec)
        else:
            m, v = tensors[f"optim.exp_avg.{name}"], tensors[f"optim.exp_avg_sq.{name}"]
            adamw_update(p, g, m, v, step + 1, spec.lr * mult, spec)
