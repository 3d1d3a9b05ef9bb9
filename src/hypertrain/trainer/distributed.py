"""Real multi-rank islands over ``torch.distributed``, byte-identical to the emulated layout.

An island of ``W`` processes (gloo on CPU, NCCL on CUDA) trains the layout's ``R``
data-parallel ranks with ``R % W == 0``: process ``p`` computes the gradients of ranks
``[p*R/W, (p+1)*R/W)`` in :func:`~hypertrain.trainer.step.train_step` (the one step; this
module passes its ranks, collective and optimizer share as the step's hooks). The
reduction never uses a collective's own summation order (gloo's all-reduce is not a
fixed-order sum from three ranks up): it is the fixed-order reduce-scatter of
reduction.py (each process receives every rank's rows of its own contiguous shard,
folds them left to right in rank order and divides by ``R*M``, exactly as
:func:`~hypertrain.trainer.step.reduce_gradients` does in one process; then the reduced
shards are gathered), so per-process memory and traffic are O(parameters). Each
gradient is copied into a fresh tensor before clipping and the optimizer, so no kernel
sees a different memory layout from the emulation.

**ZeRO-1** (``zero1=True``): the optimizer state is sharded by whole parameters
(``reduction.shard_owners``, contiguous in canonical order, balanced by size; the same
shards as the reduce-scatter's). Each process reduces only its shard's gradients, gathers
the per-tensor norms for clipping, keeps the slots of the parameters it owns, runs the
unchanged per-tensor update on them, and broadcasts the new parameter to the others;
the per-tensor arithmetic is the emulation's, so the bytes are too.
:meth:`Island.gather_state` reassembles the full state on process 0 in the canonical
order of ``state_layout``, so state hashes, checkpoints and leaves do not depend on
``W`` or on sharding.

**Expert parallelism** (``ep > 1``, MoE models): expert_parallel.py places the experts
on ranks and dispatches tokens to them; the dense parameters follow the rules above.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor

from hypertrain.protocol.manifest import InnerOptimSpec, LayoutSpec
from hypertrain.trainer.errors import TrainerError
from hypertrain.trainer.expert_parallel import ExpertEngine, ExpertPlacement, expert_param_names
from hypertrain.trainer.model import param_shapes
from hypertrain.trainer.optim import optimizer_step, slot_names
from hypertrain.trainer.reduction import ScatterFold, even_bounds, shard_bounds, shard_owners
from hypertrain.trainer.segment import (
    RoundResult,
    Sample,
    TrainConfig,
    check_round,
    round_loop,
    round_result,
    samples_to_batch,
)
from hypertrain.trainer.state import TrainState
from hypertrain.trainer.step import Grads, StepHooks, StepStats, train_step

FlatReduction = Callable[[Tensor, int], Tensor]


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
        reduction: FlatReduction | None = None,
    ) -> None:
        """``start`` is the state at ``local_step`` of the round. ``reduction`` (default:
        the fixed-order reduce-scatter) is for benchmarks that time another collective."""
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
        self.reduction = ScatterFold(self._shards()) if reduction is None else reduction
        self.hooks = self._step_hooks()

    def _shards(self) -> list[range]:
        """The reduce-scatter's shards of the flat dense gradient: ZeRO-1's (the owned
        parameters), else equal ones."""
        sizes = [math.prod(shape) for _, shape in self.dense_shapes]
        world = self.group.world_size
        if not self.zero1:
            return even_bounds(sum(sizes), world)
        return shard_bounds([self.owners[n] for n, _ in self.dense_shapes], sizes, world)

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
        cfg = self.config
        if self.experts is not None:
            self.experts.weights = {name: self.tensors[name] for name in self._expert_weights()}
        stats = train_step(
            self.tensors,
            self.step,
            rows,
            cfg.model,
            cfg.inner,
            cfg.layout,
            autocast_dtype=torch.bfloat16 if cfg.dtype == "bfloat16" else None,
            hooks=self.hooks,
            schedule_step=cfg.schedule_step(self.local_step),
        )
        self.step += 1
        self.local_step += 1
        return stats

    def _step_hooks(self) -> StepHooks:
        """The step's hooks on this process: its ranks, its collective, its optimizer part."""
        engine = self.experts
        if engine is None:
            return StepHooks(ranks=self.ranks, reduce=self._reduce, norms=self._norms,
                             update=self._apply, losses=self._island_loss)  # fmt: skip
        return StepHooks(
            enter=engine.enter,
            moe_fn=engine.moe_ffn,
            ranks=self.ranks,
            params=[name for name, _ in self.dense_shapes],
            reduce=self._reduce,
            norms=self._norms,
            update=self._apply,
            losses=self._island_loss,
        )

    def _reduce(self, rank_grads: Sequence[Grads], count: int, /) -> Grads:
        """This process's rank gradients -> the island's mean (``self.reduction``), with
        the experts' gradients from their owners under expert parallelism. Under ZeRO-1
        with the reduce-scatter, only the owned parameters' mean (the process's shard)."""
        names = [name for name, _ in self.dense_shapes]
        flat = torch.stack([torch.cat([g[n].reshape(-1) for n in names]) for g in rank_grads])
        if self.zero1 and self.experts is None and isinstance(self.reduction, ScatterFold):
            mine = [(n, s) for n, s in self.dense_shapes if self.owners[n] == self.group.rank]
            return _unflatten(self.reduction.shard(flat, count), mine)
        reduced = _unflatten(self.reduction(flat, count), self.dense_shapes)
        if self.experts is None:
            return reduced
        reduced.update(self.experts.reduced_grads(count, self.config.layout.dp_ranks))
        return {name: reduced[name] for name, _ in self.shapes}  # canonical order

    def _norms(self, grads: Grads) -> list[Tensor] | None:
        """Each reduced tensor's norm over the whole tensor, in canonical order (None: the
        process holds every tensor whole)."""
        if self.experts is not None:
            return self._expert_norms(grads, self.experts)
        if len(grads) == len(self.shapes):
            return None
        return self._owned_norms(grads)

    def _owned_norms(self, grads: Grads) -> list[Tensor]:
        """ZeRO-1 with sharded gradients: each owner's norms, gathered (the same bits)."""
        mine = torch.zeros(len(self.shapes), device=self.config.device)
        for i, (name, _) in enumerate(self.shapes):
            if name in grads:
                mine[i] = torch.linalg.vector_norm(grads[name])
        parts = [torch.empty_like(mine) for _ in range(self.group.world_size)]
        dist.all_gather(parts, mine)
        return [parts[self.owners[name]][i] for i, (name, _) in enumerate(self.shapes)]

    def _expert_norms(self, grads: Grads, engine: ExpertEngine) -> list[Tensor]:
        """Norms over the full tensors: an expert gradient is gathered in expert order."""
        full = engine.full_tensor
        return [
            torch.linalg.vector_norm(full(g) if n in self.expert_tensors else g)
            for n, g in grads.items()
        ]

    def _expert_weights(self) -> list[str]:
        return [slot for slot, name in self.expert_tensors.items() if slot == name]

    def _apply(
        self,
        tensors: MutableMapping[str, Tensor],
        grads: Grads,
        step: int,
        inner: InnerOptimSpec,
        /,
        *,
        schedule_step: int | None,
    ) -> None:
        """The optimizer on this process's gradients, then ZeRO-1's parameter broadcast."""
        mine = {n: g for n, g in grads.items() if self._owns(n)}
        optimizer_step(tensors, mine, step, inner, schedule_step=schedule_step)
        if self.zero1:
            for name, _ in self.dense_shapes:
                dist.broadcast(tensors[name], src=self.owners[name])

    def _island_loss(self, losses: Sequence[float]) -> float:
        """Sum of every rank's loss in rank order (float64 on the wire)."""
        mine = torch.tensor(list(losses), dtype=torch.float64, device=self.config.device)
        parts = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, mine)
        return sum(float(x) for part in parts for x in part.cpu())

    def advance(self, samples: Sequence[Sample], local_step: int) -> StepStats:
        """The round loop's step (``segment.Stepper``): every process passes the same samples."""
        if local_step != self.local_step:
            raise IslandError(
                f"asked for local step {local_step}, the island is at {self.local_step}"
            )
        return self.train_step(samples_to_batch(samples, self.config))

    def gather(self) -> TrainState | None:
        return self.gather_state()

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
        n = math.prod(shape)
        out[name] = flat[offset : offset + n].view(shape).clone()
        offset += n
    return out


def run_island_round(
    start: TrainState,
    config: TrainConfig,
    samples: Sequence[Sample],
    group: RankGroup,
    *,
    zero1: bool = False,
    ep: int = 1,
) -> RoundResult | None:
    """``segment.run_round`` on a real island (the same round loop): the full result
    (leaves, root, final state, losses) on process 0, None elsewhere."""
    check_round(config, samples)
    island = Island(start, config, group, zero1=zero1, ep=ep)
    leaves, final = [start.state_hash()], [start]

    def segment_done(k: int, full: TrainState | None, _: list[StepStats]) -> None:
        if full is not None:
            leaves.append(full.state_hash())
            final[0] = full

    stats = round_loop(island, config, samples, on_segment=segment_done)
    return round_result(leaves, final[0], config, stats) if group.is_root else None
