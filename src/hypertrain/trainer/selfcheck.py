"""The self-check workload: a seeded chain of float32 matrix products on one device.

Its output bytes depend on the device's arithmetic, so its tagged hash (``SELFCHECK``)
is identical on every device of one class and differs across classes with different
kernels. The miner runs it at admission (:mod:`hypertrain.miner.admission`), with the
run's fixed seed or with the seed of an admission challenge; a worker of the same class
recomputes the challenge's reference hash.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Final

import torch

from hypertrain.protocol.domains import SELFCHECK, tagged_hasher

WORKLOAD_SEED: Final = 20240611
WORKLOAD_DIM: Final = 256
WORKLOAD_STEPS: Final = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class SelfcheckConfig:
    dim: int = WORKLOAD_DIM
    steps: int = WORKLOAD_STEPS
    seed: int = WORKLOAD_SEED


def device_class(device: torch.device) -> str:
    """A name for the arithmetic a device performs: model for GPUs, ISA for CPUs."""
    if device.type == "cuda":
        return "cuda:" + torch.cuda.get_device_name(device).replace(" ", "-")
    capability = torch.backends.cpu.get_cpu_capability()
    return f"cpu:{platform.machine()}:{capability}"


def workload_hash(device: torch.device, cfg: SelfcheckConfig = SelfcheckConfig()) -> str:
    """Hex tagged hash of the workload's output bytes on ``device``."""
    generator = torch.Generator(device="cpu").manual_seed(cfg.seed)
    a = torch.randn(cfg.dim, cfg.dim, generator=generator, dtype=torch.float32)  # (D, D)
    w = torch.randn(cfg.dim, cfg.dim, generator=generator, dtype=torch.float32) / cfg.dim**0.5
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x, weight = a.to(device), w.to(device)
        for _ in range(cfg.steps):
            x = torch.tanh(x @ weight) + 0.5 * x  # (D, D)
        out = x.cpu().contiguous()
    finally:
        torch.set_num_threads(threads)
    hasher = tagged_hasher(SELFCHECK)
    hasher.update(f"{cfg.dim}:{cfg.steps}:{cfg.seed}:".encode())
    hasher.update(out.numpy().tobytes())
    return hasher.hexdigest()
