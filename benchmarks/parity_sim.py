"""Simulation core of the parity experiment: DiLoCo islands and a data-parallel baseline.

Everything runs in one process with the project's own numerics. Each cell is a real
:class:`RunManifest` (the recipe a run would publish), and every round's training config
comes from ``trainer.round_config.island_train_config(manifest, r)``, the function the
miner and the auditor call, so the learning-rate schedule follows the run's global step
exactly as in production. A DiLoCo round (:mod:`parity_round`) runs the miner's round
functions on every island and merges their updates with the aggregator's own merge
(``aggregator.combine.combine``: clip, robust weights, outer step, int8 broadcast);
held-out loss: ``trainer.model.loss_fn``. No network: an island's upload is its encoded
bytes, counted, and its download the broadcast (or the model blob).

The ``none`` codec is the harness's exact reference (no product codec, no product merge):
each island's pseudo-gradient is the float64 difference of two float32 states (exact),
merged and stepped in float64 and rounded once. With outer lr 1.0 and momentum 0 that
merge is the identity, which is what the bit-for-bit identity tests need.

Data: island ``i`` at global step ``t`` of seed ``s`` trains on a fixed slice of one
seed-dependent permutation of the training windows. The data-parallel step ``t`` trains
on the union of all islands' step-``t`` slices (batch = M x b), so both see exactly the
same tokens. Both the data-parallel arm and a cell's warm start of ``W`` steps run the
product's warm start (``trainer.warm_start``: one model on the global batch); after a warm
start the islands begin, as a run's do, from its parameters in the ``reset`` state at
global step ``W`` (``trainer.start_state.reset_state``), and round ``r`` trains global
steps ``W + r * H ...``. Each later round starts in the state the manifest's
``inner.state_policy`` gives (``reset_state`` or ``carry_state``), as the product's do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import Tensor

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
from hypertrain.trainer.checkpoint import encode_checkpoint
from hypertrain.trainer.model import init_params, loss_fn
from hypertrain.trainer.round_config import island_train_config
from hypertrain.trainer.segment import Sample
from hypertrain.trainer.start_state import reset_state
from hypertrain.trainer.state import TrainState
from hypertrain.trainer.warm_start import iter_warm_start, run_warm_start
from parity_round import diloco_round, start_swarm

Codec = Literal["int8", "int8-noef", "int4", "int4-noef", "int2", "sparse", "sparse-decay", "none"]
# SparseLoCo's error-feedback decay (its accumulator: delta + decay * residual)
SPARSE_DECAY = 0.95
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
    broadcast: bool = False  # the merge sends islands the encoded outer step
    broadcast_bits: int = 8  # ... at this width
    warm_moments: bool = False  # round 0 starts from the warm start's optimizer moments
    average: tuple[str, ...] = ()  # prototype: optimizer tensors averaged over islands
    overlap: str = ""  # prototype: overlapped rounds (parity_round.diloco_round's overlap)
    carry_bits: int = 0  # prototype: carried moments rounded (parity_round.round_moments)


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
    merged_updates: int = 0  # updates the merges included
    clipped_updates: int = 0  # of them, scaled down to the clip threshold
    excluded_updates: int = 0  # updates the merges left out
    final_state_sha256: str = ""


def cell_lr(setup: Setup, cell: Cell) -> float:
    return cell.lr or setup.lr


def compression(setup: Setup, codec: Codec) -> CompressionSpec:
    if codec == "int8":
        return CompressionSpec(error_feedback=True)
    if codec == "sparse":
        return CompressionSpec(error_feedback=True, sparse=setup.sparse)
    if codec == "sparse-decay":
        return CompressionSpec(
            error_feedback=True, sparse=setup.sparse, error_feedback_decay=SPARSE_DECAY
        )
    if codec == "int8-noef":  # the product's default compression (no error feedback)
        return CompressionSpec(error_feedback=False)
    if codec in ("int4", "int2"):  # narrower codes, with error feedback
        return CompressionSpec(error_feedback=True, bits=int(codec[3:]))  # type: ignore[arg-type]
    if codec == "int4-noef":
        return CompressionSpec(error_feedback=False, bits=4)
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
        outer=OuterOptimSpec(
            lr=cell.outer_lr,
            momentum=cell.outer_momentum,
            broadcast=f"int{cell.broadcast_bits}" if cell.broadcast else None,
        ),
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


def island_samples(manifest: RunManifest, islands: int, data: Data, r: int) -> list[list[Sample]]:
    """Each island's samples of round ``r``, in step order."""
    cfg = island_train_config(manifest, r)
    h, b = manifest.round.inner_steps, manifest.round.layout.micro_batch_size
    steps = [island_slices(data.order, islands, b, cfg.schedule_step(t)) for t in range(h)]
    return [_samples(data.windows, np.concatenate([s[i] for s in steps])) for i in range(islands)]


def genesis_state(manifest: RunManifest, cell: Cell, data: Data) -> TrainState:
    """Round 0's start state, as a run derives it: the seed's initial model, or the warm
    start's parameters, in the ``reset`` state at the round's first global step."""
    if manifest.warm_start is None:
        params = init_params(manifest.model, manifest.seed)
    else:
        batches = dp_batches(manifest, data, cell.islands, range(manifest.warm_start.steps))
        warm = run_warm_start(manifest, batches)
        params = warm.params()
    cfg = island_train_config(manifest, 0)
    state = reset_state(cfg.state_config(), params, cfg.round_start_step(0))
    if not cell.warm_moments or manifest.warm_start is None:
        return state
    moments = {k: v for k, v in warm.tensors.items() if k.startswith("optim.")}
    return TrainState(state.step, {**state.tensors, **moments}, state.config_digest)


def run_diloco(cell: Cell, setup: Setup, data: Data, seed: int) -> CellRun:
    """M islands, H inner steps per round, the product's codec, merge and start states."""
    manifest = cell_manifest(setup, cell, seed)
    if (setup.steps - cell.warm_start) % cell.inner_steps:
        raise ValueError(f"{cell.name}: the steps after the warm start are not a multiple of H")
    first = genesis_state(manifest, cell, data)
    exact = cell.codec == "none"
    swarm = start_swarm(first, cell.islands, exact=exact)
    p = sum(v.numel() for v in swarm.params.values())
    out = CellRun(
        checkpoint_bytes=len(encode_checkpoint(first)),
        warm_start_bytes=dp_bytes(p, cell.islands, cell.warm_start),
    )
    for r in range((setup.steps - cell.warm_start) // cell.inner_steps):
        samples = island_samples(manifest, cell.islands, data, r)
        swarm, log = diloco_round(
            manifest, swarm, samples, r, exact=exact, average=cell.average,
            overlap=cell.overlap, carry_bits=cell.carry_bits,
        )  # fmt: skip
        out.update_bytes += log.upload_bytes
        out.model_download_bytes += log.download_bytes
        out.merged_updates += log.merged
        out.clipped_updates += log.clipped
        out.excluded_updates += log.excluded
        out.rounds += 1
        end = cell.warm_start + (r + 1) * cell.inner_steps
        if _eval_due(setup, end):
            out.losses.append((end, heldout_loss(swarm.params, setup.model, data.heldout)))
    out.final_state_sha256 = swarm.states[0].state_hash().hex()
    return out
