"""One island's round of training, resumable from its last checkpoint.

:func:`train_round` trains ``H`` steps from a start state with the trainer's round loop
(``segment.round_loop``), one step at a time (so a progress bar can follow; the bytes
are identical to a single ``run_segment`` call of ``J`` steps, which is what an auditor
replays), and writes the checkpoint at every ``J`` steps to ``ckpt_<k>.bin`` in the
round's work directory with an atomic rename (:func:`checkpoint_writer`, which the
island's torch.distributed ranks use too).
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
from hypertrain.trainer.segment import (
    LocalStepper,
    Sample,
    SegmentHook,
    StepRunner,
    TrainConfig,
    one_step,
    round_loop,
)
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


def earlier_work(workdir: Path, start: TrainState, config: TrainConfig) -> int | None:
    """The step an earlier run of this round reached (its last checkpoint on disk), or
    None when ``workdir`` holds no work from this start; reads, never changes, the files
    (:func:`_resume_point` verifies the checkpoint it resumes from)."""
    first = checkpoint_path(workdir, 0)
    if not first.exists() or _trailer(first) != start.state_hash():
        return None
    segments = config.inner_steps // config.checkpoint_interval
    done = [k for k in range(segments + 1) if checkpoint_path(workdir, k).exists()]
    return max(done) * config.checkpoint_interval


def _losses(workdir: Path) -> dict[str, list[float]]:
    path = workdir / "losses.json"
    return dict(json.loads(path.read_text())) if path.exists() else {}


def checkpoint_writer(workdir: Path) -> SegmentHook:
    """The round loop's segment hook of an island: checkpoint ``k`` (atomic rename) and
    the segment's losses, written by the process that holds the full state."""
    losses = _losses(workdir)

    def write(k: int, full: TrainState | None, stats: list[StepStats]) -> None:
        if full is None:
            return
        save_checkpoint(full, checkpoint_path(workdir, k))
        losses[str(k - 1)] = [s.loss for s in stats]
        (workdir / "losses.json").write_text(json.dumps(losses))

    return write


def train_round(
    start: TrainState,
    config: TrainConfig,
    samples: Sequence[Sample],
    workdir: Path,
    *,
    on_step: Callable[[StepEvent], None] | None = None,
    step: StepRunner = one_step,
) -> IslandResult:
    """Train the round (resuming if ``workdir`` holds checkpoints); see the module docstring.
    ``step`` computes each step (the miner's round hooks; honest by default)."""
    h, j = config.inner_steps, config.checkpoint_interval
    resumed, state = _resume_point(workdir, start, config)
    stepper = LocalStepper(state, config, step)
    clock = [time.perf_counter()]

    def report(local: int, stats: StepStats) -> None:
        if on_step is not None:
            rate = config.tokens_per_step / max(time.perf_counter() - clock[0], 1e-9)
            on_step(StepEvent(local + 1, h, stats.loss, rate))
        clock[0] = time.perf_counter()

    round_loop(
        stepper, config, samples, first_segment=resumed, on_segment=checkpoint_writer(workdir),
        on_step=report,
    )  # fmt: skip
    paths = [checkpoint_path(workdir, k) for k in range(h // j + 1)]
    leaves = [_trailer(p) for p in paths]
    losses = _losses(workdir)
    flat = [x for k in range(h // j) for x in losses.get(str(k), [])]
    return IslandResult(
        leaves=leaves,
        root=MerkleTree.from_leaves(leaves).root,
        final=stepper.state,
        tokens=h * config.tokens_per_step,
        losses=flat,
        checkpoint_paths=paths,
        resumed_from=resumed,
    )
