"""One process per rank: the island's round trained by ranks started through torchrun.

The miner process is the island's agent: it alone talks to the service and the relay.
When the island runs more than one rank, :func:`train_ranks` writes the round's job
(:class:`IslandJob`: manifest, admitted layout, ZeRO-1 switch, expert-parallel degree),
start state and samples
beside the work directory and runs ``python -m torch.distributed.run`` with one process
per rank (local by default; any torchrun rendezvous options for several hosts). The
ranks (:func:`main`) join a gloo (CPU) or NCCL (CUDA) group; rank 0 reads the job,
finds the resume point with the same rule as ``island.train_round`` and broadcasts job,
resume checkpoint and samples, so ranks on other hosts need no files. Rank 0 writes
checkpoint ``k`` after each segment. The miner then calls ``train_round``, which finds
every checkpoint on disk and returns the round's result without training again.

A rank that dies makes torchrun stop every rank and exit non-zero: :func:`train_ranks`
raises :class:`RankError` and nothing is committed; running the round again resumes
from the last checkpoint rank 0 wrote, to the same bytes.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch.distributed as dist
from pydantic import BaseModel, ConfigDict

from hypertrain.miner.config import MinerConfig
from hypertrain.miner.errors import ConfigError, MinerError
from hypertrain.miner.island import _resume_point, checkpoint_writer
from hypertrain.protocol.manifest import LayoutSpec, RunManifest
from hypertrain.trainer.checkpoint import decode_checkpoint, encode_checkpoint
from hypertrain.trainer.determinism import check_determinism, configure_determinism
from hypertrain.trainer.distributed import Island, RankGroup, init_island
from hypertrain.trainer.profile import apply_profile
from hypertrain.trainer.round_config import island_train_config
from hypertrain.trainer.segment import Sample, TrainConfig, round_loop
from hypertrain.trainer.state import TrainState

log = logging.getLogger(__name__)
JOB_FILE, START_FILE, SAMPLES_FILE = "job.json", "start.bin", "samples.npz"


class RankError(MinerError):
    """A rank of the island died or failed: the round is not committed."""


class IslandJob(BaseModel):
    """What rank 0 reads from the miner: the round to train and how to split it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    manifest: RunManifest
    layout: LayoutSpec
    workdir: str
    zero1: bool = False
    device: str = "cpu"  # "cuda" = one device per local rank
    round_index: int = 0  # fixes the learning-rate schedule's global step
    ep: int = 1  # expert-parallel degree (trainer.expert_parallel); must divide the ranks


def job_dir(workdir: Path) -> Path:
    """Where the job files of a round's work directory live (beside it, never wiped)."""
    return workdir.with_name(workdir.name + ".island")


def torchrun_command(
    job: Path, ranks: int, extra: Sequence[str] = (), device: str = "cpu"
) -> list[str]:
    """``torchrun`` for one host (a free port of its own) unless ``extra`` names a rendezvous."""
    local = [] if _names_rendezvous(extra) else ["--standalone"]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *local,
        f"--nproc-per-node={ranks}",
        *extra,
        "-m",
        "hypertrain.miner.ranks",
        f"--device={device}",
        str(job),
    ]


def _names_rendezvous(args: Sequence[str]) -> bool:
    """Whether torchrun options name a rendezvous (an island on several hosts)."""
    return any(a.startswith(("--rdzv", "--nnodes")) for a in args)


def write_job(job: IslandJob, start: TrainState, samples: Sequence[Sample], workdir: Path) -> Path:
    """The files rank 0 reads; returns the job file."""
    folder = job_dir(workdir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / START_FILE).write_bytes(encode_checkpoint(start))
    ids = np.array([sid for sid, _ in samples], dtype=np.int64)
    tokens = np.stack([np.asarray(t) for _, t in samples]).astype(np.int64)
    np.savez(folder / SAMPLES_FILE, ids=ids, tokens=tokens)
    path = folder / JOB_FILE
    path.write_text(job.model_dump_json())
    return path


def train_ranks(
    job: IslandJob,
    start: TrainState,
    samples: Sequence[Sample],
    ranks: int,
    *,
    torchrun_args: Sequence[str] = (),
) -> None:
    """Train the round on ``ranks`` local processes (see the module docstring)."""
    path = write_job(job, start, samples, Path(job.workdir))
    kind = "cuda" if job.device.startswith("cuda") else "cpu"
    cmd = torchrun_command(path, ranks, torchrun_args, kind)
    log.info("starting %d ranks: %s", ranks, shlex.join(cmd))
    code = subprocess.call(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if code != 0:
        raise RankError(
            f"a rank of the island failed (torchrun exit {code}); nothing was committed, "
            "run the round again to resume from the last checkpoint"
        )


def launch_ranks(
    cfg: MinerConfig,
    manifest: RunManifest,
    config: TrainConfig,
    start: TrainState,
    samples: Sequence[Sample],
    workdir: Path,
) -> None:
    """Train the round on the island's ranks when it has more than one process (else the
    miner trains it in-process): ``cfg.ranks`` on this host, or the admitted layout's
    processes; its ``ep`` and ``zero1`` (or ``cfg.zero1``) choose how they split the work
    (the bytes are the same)."""
    layout = config.layout
    ranks = cfg.ranks or layout.world_size
    if ranks == 1 and layout.ep == 1:
        return
    if layout.dp_ranks % ranks:
        raise ConfigError(f"{ranks} processes cannot split {layout.dp_ranks} data-parallel ranks")
    several_hosts = _names_rendezvous(shlex.split(cfg.torchrun_args))
    if not several_hosts and ranks % layout.ep:
        raise ConfigError(f"ep={layout.ep} does not divide the island's {ranks} processes")
    job = IslandJob(
        manifest=manifest,
        layout=layout,
        workdir=str(workdir),
        zero1=layout.zero1 or bool(cfg.zero1),
        device=cfg.device,
        round_index=config.round_index,
        ep=layout.ep,
    )
    train_ranks(job, start, samples, ranks, torchrun_args=shlex.split(cfg.torchrun_args))


def _root_inputs(job_path: Path) -> tuple[dict[str, Any], int, bytes, Any]:
    """Rank 0: the job, the resume point, its checkpoint bytes and the samples."""
    job = IslandJob.model_validate_json(job_path.read_text())
    folder = job_path.parent
    config = island_train_config(job.manifest, job.round_index, layout=job.layout)
    start = decode_checkpoint((folder / START_FILE).read_bytes(), config.state_config())
    resumed, state = _resume_point(Path(job.workdir), start, config)
    with np.load(folder / SAMPLES_FILE) as npz:
        arrays = (npz["ids"], npz["tokens"])
    return job.model_dump(mode="json"), resumed, encode_checkpoint(state), arrays


def _device(job: IslandJob) -> str:
    return f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if job.device.startswith("cuda") else "cpu"


def main(argv: list[str] | None = None) -> int:
    """One rank (started by torchrun): ``python -m hypertrain.miner.ranks [--device D] [JOB]``;
    rank 0 needs JOB, the other ranks only the device kind (the backend is chosen from it)."""
    parser = argparse.ArgumentParser(prog="hypertrain.miner.ranks")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="device kind")
    parser.add_argument("job", nargs="?", type=Path, help="the job file (rank 0 only)")
    args = parser.parse_args(argv)
    group = init_island(args.device)
    if group.is_root and args.job is None:
        raise MinerError("rank 0 needs the job file")
    box: list[Any] = list(_root_inputs(args.job)) if group.is_root else [None] * 4
    dist.broadcast_object_list(box, src=0)
    job = IslandJob.model_validate(box[0])
    device = _device(job)
    det = job.manifest.determinism
    apply_profile(det, reexec=False)  # the miner set the switches before starting the ranks
    check_determinism(configure_determinism(det.num_threads, device, det.dtype), det)
    config = island_train_config(job.manifest, job.round_index, layout=job.layout, device=device)
    state = decode_checkpoint(box[2], config.state_config())
    ids, tokens = box[3]
    samples = list(zip(ids.tolist(), tokens, strict=True))
    _train(job, config, group, int(box[1]), state, samples)
    dist.destroy_process_group()
    return 0


def _train(
    job: IslandJob,
    config: TrainConfig,
    group: RankGroup,
    resumed: int,
    state: TrainState,
    samples: Sequence[Sample],
) -> None:
    """Segments ``resumed..H/J`` with the trainer's round loop; rank 0 writes each
    checkpoint and the losses."""
    workdir = Path(job.workdir)
    j = config.checkpoint_interval
    island = Island(state, config, group, zero1=job.zero1, ep=job.ep, local_step=resumed * j)
    write = checkpoint_writer(workdir) if group.is_root else None
    round_loop(island, config, samples, first_segment=resumed, on_segment=write)


if __name__ == "__main__":
    sys.exit(main())
