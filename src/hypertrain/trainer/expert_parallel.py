"""Expert parallelism: an MoE island's experts live on ranks and the tokens travel to them.

**Placement.** A world of ``W = dp × ep`` processes forms ``dp`` expert groups of ``ep``
consecutive processes (group ``g`` is ``[g*ep, (g+1)*ep)``). Member ``i`` of every group
owns the contiguous block of experts ``[i*E/ep, (i+1)*E/ep)`` of every MoE layer: their
parameters, gradients and optimizer slots live there and nowhere else in the group
(member ``i`` of the other groups holds a replica of the same block). Dense parameters
are replicated (or ZeRO-1 sharded, as in distributed.py).

**Dispatch.** Each process routes its own tokens with moe.py's rules (softmax, stable
descending sort, capacity in token order), then one all-to-all per MoE layer and
micro-batch sends, expert by expert in index order, the rows routed to each expert to its
owner in the group. The owner runs every source's rows through the expert as a separate
matmul, with exactly the shapes the single-process MoE uses, and sends the outputs back.
Backward, the owner recomputes each source's expert forward, differentiates it against
the returned output gradient and sends the input gradient back; weight gradients stay.

**Bytes.** Nothing here changes a sum's order. On the token side the autograd graph keeps
the single-process order of every accumulation (the expert input gradients reach the
layer input in descending expert order, then the router's). The owner rebuilds each
expert weight gradient as autograd sums it in one process: a zero-padded slice per active
expert, so once two or more experts are active ``-0.0`` reads ``+0.0``; then it folds
micro-batches in order and data-parallel ranks in rank order (replicas all-gather their
per-rank sums first) and divides by ``R*M``. Gradient norms are taken over the full expert
tensors, gathered in expert order, so clipping, the optimizer and every state hash equal
the single-process emulation's (docs/trainer.md, "Real islands").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from hypertrain.protocol.manifest import ModelSpec, MoESpec
from hypertrain.trainer.errors import TrainerError
from hypertrain.trainer.model import Params
from hypertrain.trainer.moe import Pick, Routed, moe_ffn
from hypertrain.trainer.reduction import fold
from hypertrain.trainer.step import Section

EXPERT_WEIGHTS = ("gate_proj", "up_proj", "down_proj")


class ExpertLayoutError(TrainerError):
    """The expert-parallel layout does not fit the model or the process group."""


def expert_param_names(spec: ModelSpec) -> list[str]:
    """Names of the expert weight tensors (leading dimension = expert), canonical order."""
    if spec.moe is None:
        return []
    return [f"layers.{i}.mlp.experts.{w}" for i in range(spec.num_layers) for w in EXPERT_WEIGHTS]


@dataclass(frozen=True, slots=True)
class ExpertPlacement:
    """Which experts this process owns (see the module docstring)."""

    num_experts: int
    ep: int
    rank: int
    world: int

    def __post_init__(self) -> None:
        if self.ep < 1 or self.world % self.ep:
            raise ExpertLayoutError(f"ep={self.ep} does not divide a world of {self.world}")
        if self.num_experts % self.ep:
            raise ExpertLayoutError(f"ep={self.ep} does not divide {self.num_experts} experts")

    @property
    def per_member(self) -> int:
        return self.num_experts // self.ep

    @property
    def member(self) -> int:
        """This process's index in its expert group (= the block it owns)."""
        return self.rank % self.ep

    @property
    def group_index(self) -> int:
        return self.rank // self.ep

    def block(self, member: int) -> range:
        return range(member * self.per_member, (member + 1) * self.per_member)

    @property
    def local(self) -> range:
        return self.block(self.member)

    def process_of(self, member: int) -> int:
        """The process of ``member`` in this process's expert group."""
        return self.group_index * self.ep + member


def make_groups(placement: ExpertPlacement) -> tuple[Any, Any]:
    """(expert group, replica group) of this process; every process calls this in step."""
    ep, world = placement.ep, placement.world
    expert_group: Any = None
    replica_group: Any = None
    if ep < world:  # dp > 1: subgroups (new_group is collective over the whole world)
        for g in range(world // ep):
            handle = dist.new_group(list(range(g * ep, (g + 1) * ep)))
            if g == placement.group_index:
                expert_group = handle
        for i in range(ep):
            handle = dist.new_group(list(range(i, world, ep)))
            if i == placement.member:
                replica_group = handle
    return expert_group, replica_group


@dataclass(slots=True)
class _Stash:
    """What an owner keeps between a layer's forward and its backward."""

    counts: list[list[int]]  # [member][expert] rows each source sent (after capacity)
    inputs: list[list[tuple[int, Tensor]]]  # [member] -> (expert, rows) for local experts
    dtype: torch.dtype  # of the rows (their gradients travel back in it)


class ExpertEngine:
    """One process's expert-parallel MoE: dispatch, owner compute, expert gradients."""

    def __init__(
        self,
        spec: ModelSpec,
        placement: ExpertPlacement,
        ranks_per_process: int,
        *,
        autocast_dtype: torch.dtype | None = None,
    ) -> None:
        assert spec.moe is not None
        self.moe: MoESpec = spec.moe
        self.placement, self.per_process = placement, ranks_per_process
        self.autocast = autocast_dtype
        self.expert_group, self.replica_group = make_groups(placement)
        self.weights: dict[str, Tensor] = {}  # local expert slices, set each step
        self.key = (0, 0)  # (local rank index, micro-batch) now in flight
        self.acc: dict[tuple[int, str], Tensor] = {}  # (data rank, weight) -> gradient sum
        self._stash: dict[tuple[str, tuple[int, int]], _Stash] = {}

    # --- token side -------------------------------------------------------------------

    def enter(self, section: Section) -> None:
        """The step's section hook: the micro-batch whose tokens are now in flight."""
        if section.name != "update":
            self.key = (section.rank, section.micro_batch)

    def moe_ffn(
        self, x: Tensor, params: Params, prefix: str, moe: MoESpec
    ) -> tuple[Tensor, Tensor]:
        """moe.py's ``moe_ffn`` with the experts computed by their owners."""
        return moe_ffn(x, params, prefix, moe, experts=self.dispatch)

    def dispatch(
        self, flat: Tensor, picks: Iterable[Pick], params: Mapping[str, Tensor], prefix: str
    ) -> Iterator[Routed]:
        """moe.py's :class:`~hypertrain.trainer.moe.Experts`: every expert's tokens sent
        to its owner at once (one all-to-all each way), the outputs back in expert order."""
        chosen = list(picks)
        sent = [tok.numel() for tok, _ in chosen]
        inputs = [flat[tok] for tok, _ in chosen if tok.numel()]
        outs = iter(_Dispatch.apply(self, prefix, sent, *inputs))  # type: ignore[no-untyped-call]
        for tok, slot in chosen:
            if tok.numel():
                yield tok, slot, next(outs)

    def forward_exchange(
        self, prefix: str, sent: list[int], inputs: Sequence[Tensor]
    ) -> list[Tensor]:
        d, device = inputs[0].shape[-1], inputs[0].device
        counts = self._all_counts(sent, device)
        rows = self._exchange(torch.cat(list(inputs)), sent, counts, d)
        received = self._split_received(rows, counts)
        self._stash[(prefix, self.key)] = _Stash(counts, received, inputs[0].dtype)
        with self._autocast(device):
            outs = [[self._expert(prefix, e, h) for e, h in src] for src in received]
        dtype = self.autocast or inputs[0].dtype
        flat_outs = [o for src in outs for o in src]
        back = torch.cat(flat_outs) if flat_outs else torch.empty(0, d, dtype=dtype, device=device)
        got = self._exchange_back(back, sent, counts, d)
        return self._split_sent(got, sent)

    def backward_exchange(
        self, prefix: str, sent: list[int], grads: Sequence[Tensor], key: tuple[int, int]
    ) -> list[Tensor]:
        stash = self._stash.pop((prefix, key))
        d = grads[0].shape[-1]
        rows = self._exchange(torch.cat([g.contiguous() for g in grads]), sent, stash.counts, d)
        grad_outs = self._split_received(rows, stash.counts)
        back: list[Tensor] = []
        for member, (src, gsrc) in enumerate(zip(stash.inputs, grad_outs, strict=True)):
            weight_grads: dict[int, tuple[Tensor, ...]] = {}
            for (e, h), (_, g) in zip(src, gsrc, strict=True):
                grad_h, *weights = self._expert_backward(prefix, e, h, g)
                back.append(grad_h)
                weight_grads[e] = tuple(weights)
            self._add_weight_grads(prefix, member, key, stash.counts[member], weight_grads)
        flat = torch.cat(back) if back else grads[0].new_empty(0, d, dtype=stash.dtype)
        got = self._exchange_back(flat, sent, stash.counts, d)
        return self._split_sent(got, sent)

    # --- owner side -------------------------------------------------------------------

    def _expert(
        self, prefix: str, e: int, h: Tensor, w: Mapping[str, Tensor] | None = None
    ) -> Tensor:
        """moe.py's expert expression on ``h`` (rows routed to expert ``e``)."""
        i, base = e - self.placement.local.start, prefix + "experts."
        if w is None:
            w = {name: self.weights[base + name][i] for name in EXPERT_WEIGHTS}
        gate, up, down = (w[name] for name in EXPERT_WEIGHTS)
        return F.linear(F.silu(F.linear(h, gate)) * F.linear(h, up), down)

    def _expert_backward(
        self, prefix: str, e: int, h: Tensor, grad_out: Tensor
    ) -> tuple[Tensor, ...]:
        """(grad of h, grads of gate/up/down) of expert ``e`` on one source's rows."""
        i, base = e - self.placement.local.start, prefix + "experts."
        leaf = h.detach().requires_grad_(True)
        w = {n: self.weights[base + n][i].detach().requires_grad_(True) for n in EXPERT_WEIGHTS}
        with torch.enable_grad(), self._autocast(h.device):
            out = self._expert(prefix, e, leaf, w)
        return tuple(torch.autograd.grad(out, [leaf, *w.values()], grad_out))

    def _add_weight_grads(
        self,
        prefix: str,
        member: int,
        key: tuple[int, int],
        counts: list[int],
        grads: Mapping[int, tuple[Tensor, ...]],
    ) -> None:
        """Fold one source micro-batch's expert weight gradients into its data rank's sum."""
        local, base = self.placement.local, prefix + "experts."
        active = sum(1 for c in counts if c)
        rank = self.placement.process_of(member) * self.per_process + key[0]
        for w, name in enumerate(EXPERT_WEIGHTS):
            full = self.weights[base + name]
            part = torch.zeros_like(full)
            for e, g in grads.items():
                part[e - local.start].copy_(g[w])
            if active >= 2:
                part.add_(0.0)  # autograd summed zero-padded slices: -0.0 reads +0.0
            slot = (rank, base + name)
            if key[1] == 0:
                self.acc[slot] = part
            else:
                self.acc[slot].add_(part)

    def reduced_grads(self, count: int, ranks: int) -> dict[str, Tensor]:
        """This member's expert gradients: rank-order fold over all ``ranks`` data ranks
        (replicas all-gather their per-rank sums), divided by ``count``."""
        group_ranks = self.placement.ep * self.per_process
        first = self.placement.group_index * group_ranks
        out: dict[str, Tensor] = {}
        for name in self.weights:
            mine = [self.acc[(r, name)] for r in range(first, first + group_ranks)]
            rows = mine
            if self.replica_group is not None and group_ranks < ranks:
                stack = torch.stack(mine)
                parts = [torch.empty_like(stack) for _ in range(ranks // group_ranks)]
                dist.all_gather(parts, stack, group=self.replica_group)
                rows = [row.clone() for part in parts for row in part]
            out[name] = fold(rows[0], rows[1:], count)
        self.acc.clear()
        return out

    def full_tensor(self, local: Tensor) -> Tensor:
        """The whole (E, ...) tensor from every member's block, in expert order."""
        if self.placement.ep == 1:
            return local
        parts = [torch.empty_like(local) for _ in range(self.placement.ep)]
        dist.all_gather(parts, local.contiguous(), group=self.expert_group)
        return torch.cat(parts)

    # --- wire -------------------------------------------------------------------------

    def _autocast(self, device: torch.device) -> Any:
        if self.autocast is None:
            return nullcontext()
        return torch.autocast(device.type, dtype=self.autocast)

    def _all_counts(self, sent: list[int], device: torch.device) -> list[list[int]]:
        """Every group member's rows per expert (on the device: NCCL needs it there)."""
        mine = torch.tensor(sent, dtype=torch.int64, device=device)
        parts = [torch.empty_like(mine) for _ in range(self.placement.ep)]
        dist.all_gather(parts, mine, group=self.expert_group)
        return [part.tolist() for part in parts]

    def _splits(self, counts: Sequence[int]) -> list[int]:
        """Rows per member of ``counts`` (one source's rows per expert)."""
        return [sum(counts[e] for e in self.placement.block(m)) for m in range(self.placement.ep)]

    def _exchange(self, send: Tensor, sent: list[int], counts: list[list[int]], d: int) -> Tensor:
        """Rows to the experts' owners; returns what this owner received, by source."""
        local = self.placement.local
        recv = [sum(src[e] for e in local) for src in counts]
        out = send.new_empty(sum(recv), d)
        dist.all_to_all_single(out, send, recv, self._splits(sent), group=self.expert_group)
        return out

    def _exchange_back(
        self, send: Tensor, sent: list[int], counts: list[list[int]], d: int
    ) -> Tensor:
        local = self.placement.local
        back = [sum(src[e] for e in local) for src in counts]
        out = send.new_empty(sum(sent), d)
        dist.all_to_all_single(out, send, self._splits(sent), back, group=self.expert_group)
        return out

    def _split_received(
        self, rows: Tensor, counts: list[list[int]]
    ) -> list[list[tuple[int, Tensor]]]:
        """(expert, rows) per source member, each a fresh tensor (as an index op makes)."""
        out, offset = [], 0
        for src in counts:
            mine = []
            for e in self.placement.local:
                if src[e]:
                    mine.append((e, rows[offset : offset + src[e]].clone()))
                    offset += src[e]
            out.append(mine)
        return out

    @staticmethod
    def _split_sent(rows: Tensor, sent: list[int]) -> list[Tensor]:
        out, offset = [], 0
        for n in sent:
            if n:
                out.append(rows[offset : offset + n].clone())
                offset += n
        return out


class _Dispatch(torch.autograd.Function):
    """(rows per active expert) -> (expert outputs per active expert), over the wire."""

    @staticmethod
    def forward(ctx: Any, *args: Any) -> Any:
        engine, prefix, sent, *inputs = args
        ctx.engine, ctx.prefix, ctx.sent, ctx.key = engine, prefix, sent, engine.key
        return tuple(engine.forward_exchange(prefix, sent, inputs))

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        back = ctx.engine.backward_exchange(ctx.prefix, ctx.sent, grads, ctx.key)
        return (None, None, None, *back)
