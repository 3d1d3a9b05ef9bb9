"""One island's round of training, resumable from its last checkpoint.

:func:`train_round` trains ``H`` steps from a start state, one step at a time (so a
progress bar can follow; the bytes are identical to a single ``run_segment`` call of
``J`` steps, which is what an auditor replays), and writes the checkpoint at every
``J`` steps to ``ckpt_<k>.bin`` in the round's work directory with an atomic rename.
Restarted after a kill, it finds the last checkpoint whose bytes verify, loads it and
continues: training is a pure function of public inputs, so the leaves, root and
final state are exactly those of an uninterrupted run.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hypertrain.protocol.merkle import MerkleTree
from hypertrain.trainer.checkpoint import DIGEST_SIZE, decode_checkpoint, save_checkpoint
from hypertrain.trainer.errors import TrainerError
from hypertrain.trainer.segment import Sample, TrainConfig, run_segment
from hypertrain.trainer.state import TrainState
from hypertrain.trainer.step import StepStats

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StepEvent:
    step: int  # local step just finished (1-based)
    total: int
    loss: float
    tokens_per_s: float


@dataclass(frozen=True, slots=True)
class IslandResult:
    leaves: list[bytes]
    root: bytes
    final: TrainState
    tokens: int
    losses: list[float]
    checkpoint_paths: list[Path]
    resumed_from: int  # segment index training restarted at (0 = fresh)


def checkpoint_path(workdir: Path, k: int) -> Path:
    return workdir / f"ckpt_{k}.bin"


def _trailer(path: Path) -> bytes:
    with path.open("rb") as handle:
        handle.seek(-DIGEST_SIZE, 2)
        return handle.read(DIGEST_SIZE)


def _resume_point(workdir: Path, start: TrainState, config: TrainConfig) -> tuple[int, TrainState]:
    """The last verified checkpoint to continue from; wipes a directory of another start."""
    first = checkpoint_path(workdir, 0)
    if first.exists() and _trailer(first) != start.state_hash():
        log.warning("work directory holds another round start; starting over")
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    segments = config.inner_steps // config.checkpoint_interval
    for k in range(segments, 0, -1):
        path = checkpoint_path(workdir, k)
        if not path.exists():
            continue
        try:
            return k, decode_checkpoint(path.read_bytes(), config.state_config())
        except TrainerError:
            log.warning("checkpoint %d is damaged; ignoring it", k)
            path.unlink()
    save_checkpoint(start, first)
    return 0, start


def _losses(workdir: Path) -> dict[str, list[float]]:
    path = workdir / "losses.json"
    return dict(json.loads(path.read_text())) if path.exists() else {}


def train_round(
    start: TrainState,
    config: TrainConfig,
    samples: Sequence[Sample],
    workdir: Path,
    *,
    on_step: Callable[[StepEvent], None] | None = None,
) -> IslandResult:
    """Train the round (resuming if ``workdir`` holds checkpoints); see the module docstring."""
    h, j, per_step = config.inner_steps, config.checkpoint_interval, config.samples_per_step
    resumed, state = _resume_point(workdir, start, config)
    losses = _losses(workdir)
    for k in range(resumed, h // j):
        seg_losses: list[float] = []
        for i in range(j):
            row = (k * j + i) * per_step
            t0, stats = time.perf_counter(), list[StepStats]()
            state = run_segment(
                state, config, samples[row : row + per_step], 1, stats=stats, local_step=k * j + i
            )
            seg_losses.append(stats[0].loss)
            if on_step is not None:
                rate = config.tokens_per_step / max(time.perf_counter() - t0, 1e-9)
                on_step(StepEvent(k * j + i + 1, h, stats[0].loss, rate))
        save_checkpoint(state, checkpoint_path(workdir, k + 1))
        losses[str(k)] = seg_losses
        (workdir / "losses.json").write_text(json.dumps(losses))
    paths = [checkpoint_path(workdir, k) for k in range(h // j + 1)]
    leaves = [_trailer(p) for p in paths]
    flat = [x for k in range(h // j) for x in losses.get(str(k), [])]
    return IslandResult(
        leaves=leaves,
        root=MerkleTree.from_leaves(leaves).root,
        final=state,
        tokens=h * config.tokens_per_step,
        losses=flat,
        checkpoint_paths=paths,
        resumed_from=resumed,
    )
