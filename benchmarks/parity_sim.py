"""Simulation core of the parity experiment: DiLoCo islands and a data-parallel baseline.

Everything runs in one process with the project's own numerics: ``trainer.segment.
run_segment`` for inner steps, ``trainer.update.build_update`` / ``iter_decode_update`` for
the int8 or sparse update with error feedback, ``aggregator.outer.nesterov_step`` for the
outer step, ``trainer.model.loss_fn`` for held-out loss. No network: an island's upload is
its encoded bytes, counted.

Data: island ``i`` at local step ``t`` of seed ``s`` trains on a fixed slice of one
seed-dependent permutation of the training windows. The data-parallel step ``t`` trains
on the union of all islands' step-``t`` slices (batch = M x b), so both see exactly the
same tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from hypertrain.aggregator.outer import nesterov_step
from hypertrain.protocol.manifest import (
    CompressionSpec,
    InnerOptimSpec,
    LayoutSpec,
    ModelSpec,
    OuterOptimSpec,
    SparseSpec,
)
from hypertrain.trainer.blob import encode_model_blob
from hypertrain.trainer.checkpoint import encode_checkpoint
from hypertrain.trainer.model import loss_fn
from hypertrain.trainer.segment import TrainConfig, run_segment
from hypertrain.trainer.state import TrainState, init_state
from hypertrain.trainer.update import build_update, iter_decode_update, next_round_state

Codec = Literal["int8", "sparse"]


@dataclass(frozen=True, slots=True)
class Cell:
    """One configuration of the grid (``kind = dp`` ignores the DiLoCo fields)."""

    name: str
    kind: Literal["dp", "diloco"]
    islands: int
    inner_steps: int = 0  # H
    outer_lr: float = 0.7
    outer_momentum: float = 0.9
    policy: Literal["carry", "reset"] = "carry"
    optimizer: Literal["adamw", "muon"] = "adamw"
    codec: Codec = "int8"
    baseline: str = ""  # name of the DP cell at the same M and optimizer


@dataclass(frozen=True, slots=True)
class Setup:
    """What every cell of one grid shares."""

    model: ModelSpec
    seq_len: int
    batch_per_island: int
    steps: int  # inner steps per island = DP steps
    lr: float
    warmup_steps: int
    muon_lr: float
    sparse: SparseSpec
    eval_every: int


@dataclass(slots=True)
class CellRun:
    losses: list[tuple[int, float]] = field(default_factory=list)  # (step, held-out loss)
    update_bytes: int = 0  # all islands' uploads
    model_download_bytes: int = 0  # all islands' start-model downloads (fp32 model blob)
    checkpoint_bytes: int = 0  # size of one full training-state checkpoint
    rounds: int = 0


def inner_spec(setup: Setup, optimizer: str) -> InnerOptimSpec:
    return InnerOptimSpec(
        name=optimizer,  # type: ignore[arg-type]
        lr=setup.lr,
        muon_lr=setup.muon_lr,
        warmup_steps=setup.warmup_steps,
        total_steps=setup.steps,
    )


def compression(setup: Setup, codec: Codec) -> CompressionSpec:
    if codec == "int8":
        return CompressionSpec(error_feedback=True)
    return CompressionSpec(error_feedback=True, sparse=setup.sparse)


def train_config(setup: Setup, cell: Cell, batch: int) -> TrainConfig:
    return TrainConfig(
        model=setup.model,
        inner=inner_spec(setup, cell.optimizer),
        layout=LayoutSpec(micro_batch_size=batch),
        seq_len=setup.seq_len,
        inner_steps=max(1, cell.inner_steps),
        checkpoint_interval=1,
        compression=compression(setup, cell.codec),
    )


def island_slices(order: np.ndarray, islands: int, batch: int, step: int) -> list[np.ndarray]:
    """Window ids island ``i`` trains on at local step ``step`` (disjoint across islands)."""
    base = step * islands * batch
    return [order[base + i * batch : base + (i + 1) * batch] for i in range(islands)]


def heldout_loss(params: dict[str, Tensor], model: ModelSpec, heldout: Tensor) -> float:
    with torch.no_grad():
        return float(loss_fn(params, model, heldout))


def _samples(windows: np.ndarray, ids: np.ndarray) -> list[tuple[int, np.ndarray]]:
    return [(int(i), windows[int(i)]) for i in ids]


def run_dp(
    cell: Cell, setup: Setup, windows: np.ndarray, heldout: Tensor, order: np.ndarray, seed: int
) -> CellRun:
    """One model, batch = M x b, the same inner optimizer and schedule."""
    cfg = train_config(setup, cell, cell.islands * setup.batch_per_island)
    state = init_state(cfg.state_config(), seed)
    out = CellRun()
    for step in range(setup.steps):
        ids = np.concatenate(island_slices(order, cell.islands, setup.batch_per_island, step))
        state = run_segment(state, cfg, _samples(windows, ids), 1)
        if (step + 1) % setup.eval_every == 0 or step + 1 == setup.steps:
            out.losses.append((step + 1, heldout_loss(state.params(), setup.model, heldout)))
    return out


def reset_moments(state: TrainState) -> TrainState:
    """The ``reset`` policy: optimizer moments zeroed at the start of every round."""
    tensors = {
        k: torch.zeros_like(v) if k.startswith("optim.") else v for k, v in state.tensors.items()
    }
    return TrainState(state.step, tensors, state.config_digest)


def outer_merge(
    global_params: dict[str, Tensor],
    momentum: dict[str, Tensor],
    updates: Sequence[bytes],
    comp: CompressionSpec,
    outer: OuterOptimSpec,
) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """Equal-weight average of the decoded updates, then the aggregator's Nesterov step."""
    shapes = [(k, tuple(v.shape)) for k, v in global_params.items()]
    acc = {k: torch.zeros_like(v) for k, v in global_params.items()}
    coef = torch.tensor(np.float32(1.0 / len(updates)))
    for data in updates:
        for name, tensor in iter_decode_update(data, comp, shapes):
            acc[name].add_(tensor.mul_(coef))
    new_params, new_m = {}, {}
    for name, theta in global_params.items():
        new_params[name], new_m[name] = nesterov_step(theta, acc[name], momentum[name], outer)
    return new_params, new_m


def _diloco_round(
    states: list[TrainState],
    cfg: TrainConfig,
    cell: Cell,
    setup: Setup,
    windows: np.ndarray,
    order: np.ndarray,
    first_step: int,
) -> tuple[list[TrainState], list[bytes], list[dict[str, Tensor] | None]]:
    h, b = cell.inner_steps, setup.batch_per_island
    ends, updates, residuals = [], [], []
    for i, start in enumerate(states):
        ids = np.concatenate(
            [island_slices(order, cell.islands, b, first_step + t)[i] for t in range(h)]
        )
        end = run_segment(start, cfg, _samples(windows, ids), h)
        update = build_update(start.params(), end, cfg.compression)
        ends.append(end)
        updates.append(update.data)
        residuals.append(update.residual)
    return ends, updates, residuals


def run_diloco(
    cell: Cell, setup: Setup, windows: np.ndarray, heldout: Tensor, order: np.ndarray, seed: int
) -> CellRun:
    """M islands, H inner steps per round, the project's codec and outer step."""
    cfg = train_config(setup, cell, setup.batch_per_island)
    outer = OuterOptimSpec(lr=cell.outer_lr, momentum=cell.outer_momentum)
    first = init_state(cfg.state_config(), seed)
    states = [first.clone() for _ in range(cell.islands)]
    global_params = first.params()
    momentum = {k: torch.zeros_like(v) for k, v in global_params.items()}
    model_blob = len(encode_model_blob(global_params, setup.model))
    out = CellRun(checkpoint_bytes=len(encode_checkpoint(first)))
    for r in range(math.ceil(setup.steps / cell.inner_steps)):
        if cell.policy == "reset":
            states = [reset_moments(s) for s in states]
        ends, updates, residuals = _diloco_round(
            states, cfg, cell, setup, windows, order, r * cell.inner_steps
        )
        global_params, momentum = outer_merge(
            global_params, momentum, updates, cfg.compression, outer
        )
        states = [
            next_round_state(e, global_params, res) for e, res in zip(ends, residuals, strict=True)
        ]
        out.update_bytes += sum(len(u) for u in updates)
        out.model_download_bytes += cell.islands * model_blob
        out.rounds += 1
        out.losses.append(
            ((r + 1) * cell.inner_steps, heldout_loss(global_params, setup.model, heldout))
        )
    return out
