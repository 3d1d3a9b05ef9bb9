"""Simulation core of the parity experiment: DiLoCo islands and a data-parallel baseline.

Everything runs in one process with the project's own numerics. Each cell is a real
:class:`RunManifest` (the recipe a run would publish), and every round's training config
comes from ``trainer.round_config.island_train_config(manifest, r)``, the function the
miner and the auditor call, so the learning-rate schedule follows the run's global step
exactly as in production. Inner steps: ``trainer.segment.run_segment``; updates:
``trainer.update.build_update`` / ``iter_decode_update`` (int8 or sparse, error feedback);
outer step: ``aggregator.outer.nesterov_step``; held-out loss: ``trainer.model.loss_fn``.
No network: an island's upload is its encoded bytes, counted.

The ``none`` codec is the harness's exact reference (no product codec): each island's
pseudo-gradient is the float64 difference of two float32 states (exact), merged and
stepped in float64 and rounded once. With outer lr 1.0 and momentum 0 that merge is the
identity, which is what the bit-for-bit identity tests need.

Data: island ``i`` at global step ``t`` of seed ``s`` trains on a fixed slice of one
seed-dependent permutation of the training windows. The data-parallel step ``t`` trains
on the union of all islands' step-``t`` slices (batch = M x b), so both see exactly the
same tokens. Both the data-parallel arm and a cell's warm start of ``W`` steps run the
product's warm start (``trainer.warm_start``: one model on the global batch); after a warm
start the islands begin, as a run's do, from its parameters in the ``reset`` state at
global step ``W`` (``trainer.start_state.reset_state``), and round ``r`` trains global
steps ``W + r * H ...``. The ``reset`` policy is the product's too: every round starts
from the merged model with zero optimizer moments and a zero error-feedback residual.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from hypertrain.aggregator.outer import nesterov_step
from hypertrain.protocol.manifest import (
    CompressionSpec,
    DataSpec,
    DeterminismRecord,
    InnerOptimSpec,
    LayoutSpec,
    ModelSpec,
    OuterOptimSpec,
    RoundSpec,
    RunManifest,
    SparseSpec,
    WarmStartSpec,
)
from hypertrain.protocol.traffic import ddp_bytes_per_device
from hypertrain.trainer.blob import encode_model_blob
from hypertrain.trainer.checkpoint import encode_checkpoint
from hypertrain.trainer.model import init_params, loss_fn
from hypertrain.trainer.round_config import island_train_config
from hypertrain.trainer.segment import Sample, run_segment
from hypertrain.trainer.start_state import reset_state
from hypertrain.trainer.state import TrainState
from hypertrain.trainer.update import build_update, iter_decode_update, next_round_state
from hypertrain.trainer.warm_start import iter_warm_start, run_warm_start

Codec = Literal["int8", "sparse", "none"]
Params = dict[str, Tensor]
HELDOUT_CHUNK = 256  # held-out windows per forward pass (bounds the logits' memory)


@dataclass(frozen=True, slots=True)
class Cell:
    """One configuration of the grid (``kind = dp`` ignores the DiLoCo fields).

    ``lr``: the inner peak learning rate (0 = the setup's); ``warm_start``: data-parallel
    steps before the islands split (the steps after it a multiple of H)."""

    name: str
    kind: Literal["dp", "diloco"]
    islands: int
    inner_steps: int = 0  # H
    outer_lr: float = 0.7
    outer_momentum: float = 0.9
    policy: Literal["carry", "reset"] = "carry"
    optimizer: Literal["adamw", "muon"] = "adamw"
    codec: Codec = "int8"
    baseline: str = ""  # name of the DP cell at the same M, size and optimizer
    lr: float = 0.0
    warm_start: int = 0
    size: str = "s"
    exploratory: bool = False


@dataclass(frozen=True, slots=True)
class Setup:
    """What every cell of one grid shares."""

    model: ModelSpec
    seq_len: int
    batch_per_island: int
    steps: int  # global steps (each island takes one inner step per global step)
    lr: float
    warmup_steps: int
    muon_lr: float
    sparse: SparseSpec
    eval_every: int
    num_threads: int = 1


@dataclass(slots=True)
class CellRun:
    losses: list[tuple[int, float]] = field(default_factory=list)  # (step, held-out loss)
    update_bytes: int = 0  # all islands' uploads
    model_download_bytes: int = 0  # all islands' start-model downloads (fp32 model blob)
    warm_start_bytes: int = 0  # the warm start's data-parallel all-reduce bytes
    checkpoint_bytes: int = 0  # size of one full training-state checkpoint
    rounds: int = 0
    final_state_sha256: str = ""


def cell_lr(setup: Setup, cell: Cell) -> float:
    return cell.lr or setup.lr


def compression(setup: Setup, codec: Codec) -> CompressionSpec:
    if codec == "int8":
        return CompressionSpec(error_feedback=True)
    if codec == "sparse":
        return CompressionSpec(error_feedback=True, sparse=setup.sparse)
    return CompressionSpec(error_feedback=False)


def cell_manifest(setup: Setup, cell: Cell, seed: int) -> RunManifest:
    """The run manifest of ``cell`` at ``seed``: a data-parallel cell is a warm start of
    every step."""
    batch = setup.batch_per_island
    global_batch = setup.batch_per_island * cell.islands
    warm = setup.steps if cell.kind == "dp" else cell.warm_start
    h = 1 if cell.kind == "dp" else cell.inner_steps
    inner = InnerOptimSpec(
        name=cell.optimizer,
        lr=cell_lr(setup, cell),
        muon_lr=setup.muon_lr,
        warmup_steps=setup.warmup_steps,
        total_steps=setup.steps,
        state_policy=cell.policy,
    )
    digest = hashlib.sha256(setup.model.model_dump_json().encode()).hexdigest()
    return RunManifest(
        run_id=f"parity-{cell.name}"[:64],
        seed=seed,
        model=setup.model,
        inner=inner,
        outer=OuterOptimSpec(lr=cell.outer_lr, momentum=cell.outer_momentum),
        round=RoundSpec(
            inner_steps=h, checkpoint_interval=h, layout=LayoutSpec(micro_batch_size=batch)
        ),
        compression=compression(setup, "none" if cell.kind == "dp" else cell.codec),
        data=DataSpec(
            dataset_root=digest,
            descriptor_sha256=digest,
            tokenizer_sha256=digest,
            sample_count=1,
            seq_len=setup.seq_len,
        ),
        determinism=DeterminismRecord(
            torch_version=torch.__version__, num_threads=setup.num_threads, device_class="cpu"
        ),
        warm_start=WarmStartSpec(steps=warm, samples_per_step=global_batch) if warm else None,
    )


def island_slices(order: np.ndarray, islands: int, batch: int, step: int) -> list[np.ndarray]:
    """Window ids island ``i`` trains on at global step ``step`` (disjoint across islands)."""
    base = step * islands * batch
    return [order[base + i * batch : base + (i + 1) * batch] for i in range(islands)]


def heldout_loss(params: Params, model: ModelSpec, heldout: Tensor) -> float:
    """Mean next-token loss over every held-out window (chunked, weighted by size)."""
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(heldout), HELDOUT_CHUNK):
            chunk = heldout[start : start + HELDOUT_CHUNK]
            total += float(loss_fn(params, model, chunk)) * len(chunk)
            count += len(chunk)
    return total / count


def _samples(windows: np.ndarray, ids: np.ndarray) -> list[Sample]:
    return [(int(i), windows[int(i)]) for i in ids]


def dp_bytes(params: int, islands: int, steps: int) -> int:
    """Bytes a data-parallel ring of ``islands`` devices sends in ``steps`` steps (the one
    place the harness counts them)."""
    return islands * ddp_bytes_per_device(params, islands, steps)


@dataclass(slots=True)
class Data:
    """The train windows, the held-out windows and one seed's data order."""

    windows: np.ndarray
    heldout: Tensor
    order: np.ndarray


def dp_batches(
    manifest: RunManifest, data: Data, islands: int, steps: range
) -> Iterator[list[Sample]]:
    """The global batch of each data-parallel step: the union of the islands' slices."""
    b = manifest.round.layout.micro_batch_size
    for step in steps:
        yield _samples(data.windows, np.concatenate(island_slices(data.order, islands, b, step)))


def _eval_due(setup: Setup, step: int) -> bool:
    return step % setup.eval_every == 0 or step == setup.steps


def run_dp(cell: Cell, setup: Setup, data: Data, seed: int) -> CellRun:
    """One model, batch = M x b, the same inner optimizer and schedule: the product's warm
    start run for every step."""
    manifest = cell_manifest(setup, cell, seed)
    batches = dp_batches(manifest, data, cell.islands, range(setup.steps))
    out, state = CellRun(), None
    for state in iter_warm_start(manifest, batches):
        if not out.checkpoint_bytes:
            out.checkpoint_bytes = len(encode_checkpoint(state))
        if _eval_due(setup, state.step):
            out.losses.append((state.step, heldout_loss(state.params(), setup.model, data.heldout)))
    assert state is not None
    out.final_state_sha256 = state.state_hash().hex()
    return out


def outer_merge(
    global_params: Params,
    momentum: Params,
    updates: Sequence[bytes],
    comp: CompressionSpec,
    outer: OuterOptimSpec,
) -> tuple[Params, Params]:
    """The aggregator's float32 merge: equal-weight average of the decoded updates (left
    fold, ``float32(1/M)`` per update), then its Nesterov step."""
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


def exact_merge(
    global_params: Params, momentum: Params, deltas: Sequence[Params], outer: OuterOptimSpec
) -> tuple[Params, Params]:
    """The ``none`` codec's merge: float64 mean of the exact deltas, Nesterov step in float64,
    rounded once to float32 (momentum kept in float64)."""
    new_params, new_m = {}, {}
    coef = 1.0 / len(deltas)
    for name, theta in global_params.items():
        acc = torch.zeros_like(theta, dtype=torch.float64)
        for d in deltas:
            acc.add_(d[name].mul(coef))
        p, new_m[name] = nesterov_step(theta.double(), acc, momentum[name], outer)
        new_params[name] = p.float()
    return new_params, new_m


def _island_round(
    start: TrainState, manifest: RunManifest, cell: Cell, data: Data, island: int, r: int
) -> tuple[TrainState, bytes, Params | None, Params]:
    """One island's round ``r``: (end state, upload bytes, residual, exact delta)."""
    h, b = cell.inner_steps, manifest.round.layout.micro_batch_size
    cfg = island_train_config(manifest, r)
    ids = np.concatenate(
        [island_slices(data.order, cell.islands, b, cfg.schedule_step(t))[island] for t in range(h)]
    )
    end = run_segment(start, cfg, _samples(data.windows, ids), h)
    if cell.codec == "none":
        sp, ep = start.params(), end.params()
        delta = {k: sp[k].double() - ep[k].double() for k in sp}
        return end, b"", None, delta
    update = build_update(start.params(), end, cfg.compression)
    return end, update.data, update.residual, {}


def genesis_state(manifest: RunManifest, cell: Cell, data: Data) -> TrainState:
    """Round 0's start state, as a run derives it: the seed's initial model, or the warm
    start's parameters, in the ``reset`` state at the round's first global step."""
    if manifest.warm_start is None:
        params = init_params(manifest.model, manifest.seed)
    else:
        batches = dp_batches(manifest, data, cell.islands, range(manifest.warm_start.steps))
        params = run_warm_start(manifest, batches).params()
    cfg = island_train_config(manifest, 0)
    return reset_state(cfg.state_config(), params, cfg.round_start_step(0))


def run_diloco(cell: Cell, setup: Setup, data: Data, seed: int) -> CellRun:
    """M islands, H inner steps per round, the project's codec and outer step."""
    manifest = cell_manifest(setup, cell, seed)
    if (setup.steps - cell.warm_start) % cell.inner_steps:
        raise ValueError(f"{cell.name}: the steps after the warm start are not a multiple of H")
    first = genesis_state(manifest, cell, data)
    states = [first.clone() for _ in range(cell.islands)]
    global_params = first.params()
    dtype = torch.float64 if cell.codec == "none" else torch.float32
    momentum = {k: torch.zeros_like(v, dtype=dtype) for k, v in global_params.items()}
    p = sum(v.numel() for v in global_params.values())
    out = CellRun(
        checkpoint_bytes=len(encode_checkpoint(first)),
        warm_start_bytes=dp_bytes(p, cell.islands, cell.warm_start),
    )
    model_blob = len(encode_model_blob(global_params, setup.model))
    for r in range((setup.steps - cell.warm_start) // cell.inner_steps):
        if cell.policy == "reset":
            cfg = island_train_config(manifest, r)
            start = cfg.round_start_step(r)
            states = [reset_state(cfg.state_config(), global_params, start) for _ in states]
        rounds = [_island_round(s, manifest, cell, data, i, r) for i, s in enumerate(states)]
        if cell.codec == "none":
            global_params, momentum = exact_merge(
                global_params, momentum, [x[3] for x in rounds], manifest.outer
            )
            out.update_bytes += cell.islands * 4 * p
        else:
            updates = [x[1] for x in rounds]
            global_params, momentum = outer_merge(
                global_params, momentum, updates, manifest.compression, manifest.outer
            )
            out.update_bytes += sum(len(u) for u in updates)
        states = [next_round_state(x[0], global_params, x[2]) for x in rounds]
        out.model_download_bytes += cell.islands * model_blob
        out.rounds += 1
        end = cell.warm_start + (r + 1) * cell.inner_steps
        if _eval_due(setup, end):
            out.losses.append((end, heldout_loss(global_params, setup.model, data.heldout)))
    out.final_state_sha256 = states[0].state_hash().hex()
    return out
