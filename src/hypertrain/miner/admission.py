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
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from hypertrain.challenge.client import ChallengeClient
from hypertrain.challenge.errors import ServiceError
from hypertrain.challenge.models import AdmissionStatus
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import AdmissionAnswer, DeviceReport
from hypertrain.trainer.selfcheck import (
    DEFAULT_PROBE_BYTES,
    WORKLOAD_DIM,
    WORKLOAD_SEED,
    WORKLOAD_STEPS,
    SelfcheckConfig,
    device_class,
    workload_hash,
)

__all__ = [
    "WORKLOAD_DIM",
    "WORKLOAD_SEED",
    "WORKLOAD_STEPS",
    "SelfcheckConfig",
    "answer_challenge",
    "challenge_hashes",
    "device_class",
    "memory_probe",
    "selfcheck",
    "workload_hash",
]


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


_DEFAULT_CONFIG = SelfcheckConfig()
DECIDED = frozenset({"admitted", "refused"})


def selfcheck(
    devices: list[torch.device] | None = None, cfg: SelfcheckConfig = _DEFAULT_CONFIG
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


def challenge_hashes(seed: int, steps: int, devices: list[torch.device] | None = None) -> list[str]:
    """The workload hash on every device for an admission challenge's seed, in order; the
    devices run concurrently, since the deadline is sized to one device's throughput."""
    cfg = SelfcheckConfig(seed=seed, steps=steps)
    chosen = devices or local_devices()
    if len(chosen) == 1:
        return [workload_hash(chosen[0], cfg)]
    with ThreadPoolExecutor(max_workers=len(chosen)) as pool:  # every device at once
        return list(pool.map(lambda device: workload_hash(device, cfg), chosen))


def answer_challenge(
    service: ChallengeClient,
    key: Hotkey,
    run_id: str,
    *,
    devices: list[torch.device] | None = None,
    poll_s: float = 1.0,
    timeout_s: float = 600.0,
    expiry_margin: int = 50,
) -> AdmissionStatus:
    """Wait for the challenge seed, run the workload on every device, post the answer,
    then wait for a worker's decision.

    Returns the challenge status: ``admitted`` or ``refused`` (with its reason) once
    decided, else the last status seen when ``timeout_s`` ran out (``pending`` or
    ``answered``: a worker of the island's device class has not checked it yet)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = service.admission_status(run_id, key.ss58_address)
        if status.status != "pending":
            return status
        if status.seed is not None:
            break
        if time.monotonic() > deadline:
            return status
        time.sleep(poll_s)
    hashes = challenge_hashes(status.seed, status.workload_steps, devices)
    body = AdmissionAnswer(seed_beacon_round=status.seed_beacon_round, hashes=hashes)
    env = seal(
        key,
        domain="admission-answer",
        run_id=run_id,
        body=body.model_dump(mode="json"),
        expiry_round=service.beacon_round() + expiry_margin,
    )
    try:
        service.admission_answer(env)
    except ServiceError as exc:
        if exc.code not in ("late", "closed"):
            raise  # the challenge is decided (a late answer refuses the island)
    while True:
        status = service.admission_status(run_id, key.ss58_address)
        if status.status in DECIDED or time.monotonic() > deadline:
            return status
        time.sleep(poll_s)


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
