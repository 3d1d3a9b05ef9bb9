"""Real multi-rank islands over ``torch.distributed``, byte-identical to the emulated layout.

An island of ``W`` processes (gloo on CPU, NCCL on CUDA) trains the layout's ``R``
data-parallel ranks with ``R % W == 0``: process ``p`` computes the gradients of ranks
``[p*R/W, (p+1)*R/W)`` with :func:`~hypertrain.trainer.step.rank_gradient`. The
reduction never uses a collective's own summation order (gloo's all-reduce is not a
fixed-order sum from three ranks up): every process all-gathers the flat per-rank
gradients and folds them left to right in rank order, then divides by ``R*M``, exactly
as :func:`~hypertrain.trainer.step.reduce_gradients` does in one process. Each
gradient is copied into a fresh tensor before clipping and the optimizer, so no kernel
sees a different memory layout from the emulation. The all-gather holds ``R`` gradient
copies per process for a moment; a reduce-scatter with a fixed per-chunk order would
cut that to one and is the next step for large models.

**ZeRO-1** (``zero1=True``): the optimizer state is sharded by whole parameters
(:func:`shard_owners`, contiguous in canonical order, balanced by size). Each process
keeps the slots of the parameters it owns, runs the unchanged per-tensor update on
them, and broadcasts the new parameter to the others; the per-tensor arithmetic is the
emulation's, so the bytes are too. :meth:`Island.gather_state` reassembles the full
state on process 0 in the canonical order of ``state_layout``, so state hashes,
checkpoints and leaves do not depend on ``W`` or on sharding.

**Expert parallelism** (``ep > 1``, MoE models): expert_parallel.py places the experts
on ranks and dispatches tokens to them; the dense parameters follow the rules above.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor

from hypertrain.protocol.manifest import LayoutSpec
from hypertrain.protocol.merkle import MerkleTree
from hypertrain.trainer.errors import SampleError, TrainerError
from hypertrain.trainer.expert_parallel import (
    ExpertEngine,
    ExpertPlacement,
    ep_rank_gradient,
    expert_param_names,
)
from hypertrain.trainer.model import param_shapes
from hypertrain.trainer.optim import clip_grads, optimizer_step, slot_names
from hypertrain.trainer.segment import RoundResult, Sample, TrainConfig, samples_to_batch
from hypertrain.trainer.state import TrainState
from hypertrain.trainer.step import Grads, StepStats, rank_gradient, split_batch

Reduction = Callable[[Tensor, int], Tensor]


class IslandError(TrainerError):
    """The island's process group or layout cannot train as asked."""


@dataclass(frozen=True, slots=True)
class RankGroup:
    """This process's place in the island's process group."""

    rank: int
    world_size: int

    @property
    def is_root(self) -> bool:
        return self.rank == 0


def backend_for(device: str) -> str:
    return "nccl" if device.startswith("cuda") else "gloo"


def init_island(device: str = "cpu") -> RankGroup:
    """Join the process group described by torchrun's environment (``RANK``, ...)."""
    if not dist.is_initialized():
        if "RANK" not in os.environ:
            raise IslandError("not started by torchrun: RANK/WORLD_SIZE are not set")
        if device.startswith("cuda"):
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend_for(device))
    return RankGroup(dist.get_rank(), dist.get_world_size())


def local_ranks(layout: LayoutSpec, group: RankGroup) -> range:
    """The data-parallel ranks whose gradients this process computes."""
    if layout.dp_ranks % group.world_size:
        raise IslandError(
            f"{layout.dp_ranks} data-parallel ranks do not split over {group.world_size} processes"
        )
    per = layout.dp_ranks // group.world_size
    return range(group.rank * per, (group.rank + 1) * per)


def gather_fold(flat: Tensor, count: int) -> Tensor:
    """All-gather every process's (k, N) rank gradients, sum them left to right in rank
    order and divide by ``count``: the bytes of ``reduce_gradients``."""
    parts = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, flat.contiguous())
    rows = [row for part in parts for row in part]  # rank order
    out: Tensor = rows[0].clone()
    for row in rows[1:]:
        out.add_(row)
    out.div_(count)
    return out


def all_reduce_mean(flat: Tensor, count: int) -> Tensor:
    """The library's own-order reduction; for benchmarks only: its bytes are not canonical."""
    out = flat.sum(0) if flat.shape[0] > 1 else flat[0].clone()
    dist.all_reduce(out)
    out.div_(count)
    return out


def shard_owners(model_shapes: Sequence[tuple[str, tuple[int, ...]]], world: int) -> dict[str, int]:
    """Owner process of each parameter: contiguous runs in canonical order, cut where the
    running element count passes ``(p+1)/W`` of the total."""
    sizes = [(name, max(1, _numel(shape))) for name, shape in model_shapes]
    total, running, owners = sum(n for _, n in sizes), 0, {}
    for name, n in sizes:
        owners[name] = min(world - 1, running * world // total)
        running += n
    return owners


def _numel(shape: tuple[int, ...]) -> int:
    out = 1
    for dim in shape:
        out *= dim
    return out


class Island:
    """One process's share of an island's training state (see the module docstring)."""

    def __init__(
        self,
        start: TrainState,
        config: TrainConfig,
        group: RankGroup,
        *,
        zero1: bool = False,
        ep: int = 1,
        local_step: int = 0,
    ) -> None:
        """``start`` is the state at ``local_step`` of the round."""
        if start.config_digest != config.state_config().digest():
            raise IslandError("start state was made for another model or optimizer config")
        self.config, self.group, self.zero1 = config, group, zero1
        self.ranks = local_ranks(config.layout, group)
        self.shapes = param_shapes(config.model)
        self.experts = self._expert_engine(ep)
        expert_names = set(expert_param_names(config.model)) if self.experts else set()
        self.dense_shapes = [(n, s) for n, s in self.shapes if n not in expert_names]
        self.expert_tensors = {  # expert weight or slot -> its weight
            slot: name
            for name, shape in self.shapes
            if name in expert_names
            for slot in (name, *slot_names(name, shape, config.inner))
        }
        self.owners = shard_owners(self.dense_shapes, group.world_size if zero1 else 1)
        self.step, self.local_step = start.step, local_step
        self.digest = start.config_digest
        self.slot_owners = self._slot_owners() if zero1 else {}
        self.tensors = {
            name: self._local_part(name, t).to(config.device, copy=True)
            for name, t in start.tensors.items()
            if self._holds(name)
        }
        self.reduction: Reduction = gather_fold

    def _expert_engine(self, ep: int) -> ExpertEngine | None:
        if ep == 1:
            return None
        if self.config.model.moe is None:
            raise IslandError("expert parallelism (ep > 1) needs a mixture-of-experts model")
        placement = ExpertPlacement(
            self.config.model.moe.num_experts, ep, self.group.rank, self.group.world_size
        )
        autocast = torch.bfloat16 if self.config.dtype == "bfloat16" else None
        return ExpertEngine(self.config.model, placement, len(self.ranks), autocast_dtype=autocast)

    def _local_part(self, name: str, t: Tensor) -> Tensor:
        """An expert tensor's block of this process's experts; any other tensor whole."""
        if self.experts is None or name not in self.expert_tensors:
            return t.detach()
        block = self.experts.placement.local
        return t.detach()[block.start : block.stop]

    def _slot_owners(self) -> dict[str, int]:
        return {
            slot: self.owners[name]
            for name, shape in self.dense_shapes
            for slot in slot_names(name, shape, self.config.inner)
        }

    def _holds(self, name: str) -> bool:
        return self.slot_owners.get(name, self.group.rank) == self.group.rank

    def _owns(self, param: str) -> bool:
        if param in self.expert_tensors:
            return True  # this process's block of the experts
        return not self.zero1 or self.owners[param] == self.group.rank

    def state_bytes(self) -> int:
        """Bytes of training state this process holds (parameters, its slots, residual)."""
        return sum(t.numel() * t.element_size() for t in self.tensors.values())

    def train_step(self, rows: Tensor) -> StepStats:
        """One global step on the step's (B, L) batch; every process passes the same rows."""
        if self.experts is not None:
            return self._expert_step(rows, self.experts)
        cfg = self.config
        params = {name: self.tensors[name] for name, _ in self.shapes}
        shards = split_batch(rows, cfg.layout)
        autocast = torch.bfloat16 if cfg.dtype == "bfloat16" else None
        per_rank = [
            rank_gradient(params, cfg.model, shards[r], autocast_dtype=autocast) for r in self.ranks
        ]
        count = cfg.layout.dp_ranks * cfg.layout.micro_batches
        flat = torch.stack([torch.cat([g[n].reshape(-1) for n in params]) for g, _ in per_rank])
        grads = _unflatten(self.reduction(flat, count), self.shapes)
        norm = clip_grads(grads, cfg.inner.grad_clip)
        mine = {n: g for n, g in grads.items() if self._owns(n)}
        self._update(mine)
        return StepStats(loss=_gather_loss(per_rank, rows.device) / count, grad_norm=norm)

    def _expert_step(self, rows: Tensor, engine: ExpertEngine) -> StepStats:
        """train_step with the experts on their owners (expert_parallel.py)."""
        cfg = self.config
        engine.weights = {name: self.tensors[name] for name in self._expert_weights()}
        dense = {name: self.tensors[name] for name, _ in self.dense_shapes}
        shards = split_batch(rows, cfg.layout)
        per_rank = [
            ep_rank_gradient(dense, cfg.model, shards[r], engine, k)
            for k, r in enumerate(self.ranks)
        ]
        count = cfg.layout.dp_ranks * cfg.layout.micro_batches
        flat = torch.stack([torch.cat([g[n].reshape(-1) for n in dense]) for g, _ in per_rank])
        reduced = _unflatten(self.reduction(flat, count), self.dense_shapes)
        reduced.update(engine.reduced_grads(count, cfg.layout.dp_ranks))
        grads = {name: reduced[name] for name, _ in self.shapes}  # canonical order
        norms = [
            torch.linalg.vector_norm(engine.full_tensor(g) if n in self.expert_tensors else g)
            for n, g in grads.items()
        ]
        norm = clip_grads(grads, cfg.inner.grad_clip, norms)
        self._update({n: g for n, g in grads.items() if self._owns(n)})
        return StepStats(loss=_gather_loss(per_rank, rows.device) / count, grad_norm=norm)

    def _expert_weights(self) -> list[str]:
        return [slot for slot, name in self.expert_tensors.items() if slot == name]

    def _update(self, mine: Grads) -> None:
        """The optimizer on this process's gradients, then ZeRO-1's parameter broadcast."""
        schedule = self.config.schedule_step(self.local_step)
        optimizer_step(self.tensors, mine, self.step, self.config.inner, schedule_step=schedule)
        if self.zero1:
            for name, _ in self.dense_shapes:
                dist.broadcast(self.tensors[name], src=self.owners[name])
        self.step += 1
        self.local_step += 1

    def run(
        self, samples: Sequence[Sample], num_steps: int, stats: list[StepStats] | None = None
    ) -> None:
        per_step = self.config.samples_per_step
        if len(samples) != num_steps * per_step:
            raise SampleError(
                f"{num_steps} steps need {num_steps * per_step} samples, got {len(samples)}"
            )
        batch = samples_to_batch(samples, self.config) if samples else None
        for i in range(num_steps):
            assert batch is not None
            result = self.train_step(batch[i * per_step : (i + 1) * per_step])
            if stats is not None:
                stats.append(result)

    def gather_state(self) -> TrainState | None:
        """The full state in canonical order on process 0 (None elsewhere); collective."""
        full: dict[str, Tensor] = {}
        for spec in self.config.state_config().layout():
            if spec.name in self.expert_tensors:
                self._gather_experts(spec.name, spec.shape, spec.dtype, full)
                continue
            owner = self.slot_owners.get(spec.name, 0)
            if owner == 0:
                if self.group.is_root:
                    full[spec.name] = self.tensors[spec.name].cpu()
            elif self.group.rank == owner:
                dist.send(self.tensors[spec.name].contiguous(), dst=0)
            elif self.group.is_root:
                buf = torch.empty(spec.shape, dtype=spec.dtype, device=self.config.device)
                dist.recv(buf, src=owner)
                full[spec.name] = buf.cpu()
        return TrainState(self.step, full, self.digest) if self.group.is_root else None

    def _gather_experts(
        self, name: str, shape: tuple[int, ...], dtype: torch.dtype, full: dict[str, Tensor]
    ) -> None:
        """Expert group 0's blocks of ``name`` onto process 0, concatenated in expert order."""
        assert self.experts is not None
        ep = self.experts.placement.ep
        if self.group.is_root:
            parts = [self.tensors[name].cpu()]
            for src in range(1, ep):
                buf = torch.empty(
                    (shape[0] // ep, *shape[1:]), dtype=dtype, device=self.config.device
                )
                dist.recv(buf, src=src)
                parts.append(buf.cpu())
            full[name] = torch.cat(parts)
        elif self.group.rank < ep:
            dist.send(self.tensors[name].contiguous(), dst=0)

    def state_hash(self) -> bytes:
        """The full state's hash, computed on process 0 and sent to every process."""
        state = self.gather_state()
        digest = torch.zeros(32, dtype=torch.uint8)
        if state is not None:
            digest = torch.frombuffer(bytearray(state.state_hash()), dtype=torch.uint8)
        return broadcast_bytes(digest, self.config.device)


def broadcast_bytes(data: Tensor, device: str) -> bytes:
    buf = data.to(device)
    dist.broadcast(buf, src=0)
    return bytes(buf.cpu().tolist())


def _unflatten(flat: Tensor, shapes: Sequence[tuple[str, tuple[int, ...]]]) -> Grads:
    """Split a flat gradient into fresh tensors (fresh allocations, as autograd's are)."""
    out: Grads = {}
    offset = 0
    for name, shape in shapes:
        n = _numel(shape)
        out[name] = flat[offset : offset + n].view(shape).clone()
        offset += n
    return out


def _gather_loss(per_rank: Sequence[tuple[Grads, float]], device: torch.device) -> float:
    """Sum of every rank's loss in rank order (float64 on the wire)."""
    mine = torch.tensor([loss for _, loss in per_rank], dtype=torch.float64, device=device)
    parts = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, mine)
    return sum(float(x) for part in parts for x in part.cpu())


def run_island_round(
    start: TrainState,
    config: TrainConfig,
    samples: Sequence[Sample],
    group: RankGroup,
    *,
    zero1: bool = False,
    ep: int = 1,
) -> RoundResult | None:
    """``segment.run_round`` on a real island: the same leaves and root on every process;
    the full result (final state, losses) on process 0, None elsewhere."""
    h, j = config.inner_steps, config.checkpoint_interval
    if h % j:
        raise IslandError(f"checkpoint interval {j} does not divide {h} inner steps")
    per_segment = j * config.samples_per_step
    if len(samples) != h * config.samples_per_step:
        raise SampleError(f"a round of {h} steps needs {h * config.samples_per_step} samples")
    island, stats = Island(start, config, group, zero1=zero1, ep=ep), list[StepStats]()
    leaves = [island.state_hash()]
    for k in range(h // j):
        island.run(samples[k * per_segment : (k + 1) * per_segment], j, stats)
        leaves.append(island.state_hash())
    final = island.gather_state()
    if final is None:
        return None
    root = MerkleTree.from_leaves(leaves).root
    return RoundResult(leaves, root, final, h * config.tokens_per_step, [s.loss for s in stats])
