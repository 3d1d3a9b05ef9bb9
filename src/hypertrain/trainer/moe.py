"""Mixture-of-experts SwiGLU feed-forward with deterministic top-k routing.

Routing: softmax over expert logits, then a *stable* descending sort, so equal
probabilities (ties) always pick the lower expert index. Gates are the top-k
probabilities renormalised to sum to 1. Capacity: ``capacity_factor=None`` is no-drop;
otherwise each expert keeps the first ``ceil(cf * N * k / E)`` (token, slot) pairs in
token order and drops the rest (a dropped slot contributes zero). The balance loss is
the Switch-Transformer one, ``E * sum_e f_e * P_e`` (f: fraction of routed slots,
P: mean router probability). Every accumulation has a fixed order: each (token, slot)
is written once, then the k slots are summed left to right. :func:`moe_ffn` is the one
routing and combination; its ``experts`` computes the experts' outputs, one after the
other in this process (:func:`local_experts`) or on their owners
(expert_parallel.py), so the operations around the experts are the same code.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Protocol

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from hypertrain.protocol.manifest import ModelSpec, MoESpec


def expert_shapes(spec: ModelSpec) -> list[tuple[str, tuple[int, ...]]]:
    """Names (relative to ``layers.i.``) and shapes of one MoE block's parameters."""
    assert spec.moe is not None
    e, d, f = spec.moe.num_experts, spec.d_model, spec.ffn_hidden
    return [
        ("mlp.router.weight", (e, d)),
        ("mlp.experts.gate_proj", (e, f, d)),
        ("mlp.experts.up_proj", (e, f, d)),
        ("mlp.experts.down_proj", (e, d, f)),
    ]


def route(probs: Tensor, top_k: int) -> tuple[Tensor, Tensor]:
    """(gates, expert ids), each (N, k); ties broken towards the lower expert id."""
    sorted_p, sorted_i = torch.sort(probs, dim=-1, descending=True, stable=True)
    top_p, top_i = sorted_p[:, :top_k], sorted_i[:, :top_k]
    return top_p / top_p.sum(-1, keepdim=True), top_i


def capacity(num_tokens: int, moe: MoESpec) -> int:
    slots = num_tokens * moe.top_k
    if moe.capacity_factor is None:
        return slots
    return max(1, math.ceil(moe.capacity_factor * slots / moe.num_experts))


Pick = tuple[Tensor, Tensor]  # (token rows, their slots) routed to one expert, token order
Routed = tuple[Tensor, Tensor, Tensor]  # (token rows, slots, the expert's outputs for them)


class Experts(Protocol):
    """The experts' side of :func:`moe_ffn`: given each expert's picks in expert order,
    yields, for every expert that got tokens, its picks and its outputs, in expert order
    (:func:`local_experts` computes them here; expert parallelism dispatches them)."""

    def __call__(
        self, flat: Tensor, picks: Iterable[Pick], params: Mapping[str, Tensor], prefix: str
    ) -> Iterator[Routed]: ...


def local_experts(
    flat: Tensor, picks: Iterable[Pick], params: Mapping[str, Tensor], prefix: str
) -> Iterator[Routed]:
    """Every expert computed in this process, one after the other as the picks come."""
    gate_w = params[prefix + "experts.gate_proj"]
    up_w = params[prefix + "experts.up_proj"]
    down_w = params[prefix + "experts.down_proj"]
    for e, (tok, slot) in enumerate(picks):
        if tok.numel() == 0:
            continue
        h = flat[tok]
        yield tok, slot, F.linear(F.silu(F.linear(h, gate_w[e])) * F.linear(h, up_w[e]), down_w[e])


def _picks(chosen: Tensor, moe: MoESpec, cap: int, counts: list[int]) -> Iterator[Pick]:
    """Each expert's first ``cap`` (token, slot) pairs in token order; ``counts`` gets
    how many it was routed before the cap."""
    for e in range(moe.num_experts):
        tok, slot = (chosen == e).nonzero(as_tuple=True)  # row-major: token order
        counts.append(tok.numel())
        yield tok[:cap], slot[:cap]


def moe_ffn(
    x: Tensor,
    params: Mapping[str, Tensor],
    prefix: str,
    moe: MoESpec,
    experts: Experts = local_experts,
) -> tuple[Tensor, Tensor]:
    """Apply the MoE feed-forward to (B, T, d); returns the output and the balance loss.
    The one routing and combination every island runs; ``experts`` computes the experts."""
    shape = x.shape
    flat = x.reshape(-1, shape[-1])  # (N, d)
    probs = F.softmax(F.linear(flat, params[prefix + "router.weight"]), dim=-1)  # (N, E)
    gates, chosen = route(probs, moe.top_k)
    counts: list[int] = []
    picks = _picks(chosen, moe, capacity(flat.shape[0], moe), counts)
    slots = flat.new_zeros(flat.shape[0], moe.top_k, shape[-1])  # (N, k, d)
    for tok, slot, out in experts(flat, picks, params, prefix):
        slots = slots.index_put((tok, slot), out * gates[tok, slot].unsqueeze(-1))
    y = slots[:, 0]
    for j in range(1, moe.top_k):
        y = y + slots[:, j]
    frac = torch.tensor(counts, dtype=probs.dtype, device=probs.device) / chosen.numel()
    aux = moe.num_experts * (frac * probs.mean(0)).sum()
    return y.reshape(shape), aux
