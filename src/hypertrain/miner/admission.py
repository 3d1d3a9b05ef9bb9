"""The admission self-check: a fixed-seed workload and a memory probe on every device.

``python -m hypertrain.miner.admission selfcheck`` runs it and prints the hardware
report a join request carries (one :class:`~hypertrain.protocol.messages.DeviceReport`
per device). The workload is a short chain of float32 matrix products and
nonlinearities from a seeded generator, single-threaded on CPU so the bytes do not
depend on the thread count; its hash (tagged ``SELFCHECK``) must be identical on
every device of one class. The operator runs the same command on a reference
machine and puts the hash in the run manifest's ``selfcheck_reference``; a device
whose arithmetic differs (wrong kernels, faulty card) cannot join.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import torch

from hypertrain.protocol.domains import SELFCHECK, tagged_hasher
from hypertrain.protocol.messages import DeviceReport

WORKLOAD_SEED: Final = 20240611
WORKLOAD_DIM: Final = 256
WORKLOAD_STEPS: Final = 8
DEFAULT_PROBE_BYTES: Final = 64 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class SelfcheckConfig:
    dim: int = WORKLOAD_DIM
    steps: int = WORKLOAD_STEPS
    seed: int = WORKLOAD_SEED
    probe_bytes: int = DEFAULT_PROBE_BYTES


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


def memory_probe(device: torch.device, probe_bytes: int) -> bool:
    """Fill ``probe_bytes`` with a known pattern and read it back exactly."""
    count = max(1, probe_bytes // 4)
    try:
        block = torch.arange(count, dtype=torch.int32, device=device)
        block.mul_(2654435761 % 2**31).bitwise_xor_(0x5A5A5A5A)
        expected = torch.arange(count, dtype=torch.int32).mul_(2654435761 % 2**31)
        expected.bitwise_xor_(0x5A5A5A5A)
        ok = bool(torch.equal(block.cpu(), expected))
    except RuntimeError:
        return False
    return ok


def local_devices() -> list[torch.device]:
    if torch.cuda.is_available():
        return [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    return [torch.device("cpu")]


def device_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    try:
        pages = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pages = 0
    return pages


def selfcheck(
    devices: list[torch.device] | None = None, cfg: SelfcheckConfig = SelfcheckConfig()
) -> list[DeviceReport]:
    """The hardware report: one entry per device."""
    reports = []
    for index, device in enumerate(devices or local_devices()):
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
        reports.append(
            DeviceReport(
                index=index,
                name=(name or "cpu")[:128],
                device_class=device_class(device)[:128],
                memory_bytes=device_memory(device),
                workload_hash=workload_hash(device, cfg),
                memory_probe_ok=memory_probe(device, cfg.probe_bytes),
            )
        )
    return reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hypertrain.miner.admission")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("selfcheck", help="run the workload and memory probe on every device")
    run.add_argument("--out", type=Path, help="also write the JSON report to this file")
    run.add_argument(
        "--probe-mib", type=int, default=DEFAULT_PROBE_BYTES >> 20, help="memory probe size"
    )
    args = parser.parse_args(argv)
    reports = selfcheck(cfg=SelfcheckConfig(probe_bytes=args.probe_mib << 20))
    doc: dict[str, Any] = {"devices": [r.model_dump(mode="json") for r in reports]}
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if args.out is not None:
        args.out.write_text(text)
    sys.stdout.write(text)
    consistent = len({r.workload_hash for r in reports}) == 1
    return 0 if consistent and all(r.memory_probe_ok for r in reports) else 1


if __name__ == "__main__":
    raise SystemExit(main())
