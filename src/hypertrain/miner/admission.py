"""The admission self-check: a fixed-seed workload on every device, and the memory proof.

``python -m hypertrain.miner.admission selfcheck`` runs the workload and prints the
hardware report a join request carries (one
:class:`~hypertrain.protocol.messages.DeviceReport` per device, each with the memory it
claims). The workload is a short chain of float32 matrix products and nonlinearities
from a seeded generator, single-threaded on CPU so the bytes do not depend on the thread
count; its hash (tagged ``SELFCHECK``) must be identical on every device of one class.
The operator runs the same command on a reference machine and puts the hash in the run
manifest's ``selfcheck_reference``; a device whose arithmetic differs (wrong kernels,
faulty card) cannot join. Under the admission challenge each device also proves its
memory claim (:mod:`hypertrain.trainer.memproof`) within the answer window.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import AdmissionStatus
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.memproof import MIN_CLAIM_BYTES
from hypertrain.protocol.messages import AdmissionAnswer, DeviceReport
from hypertrain.trainer.memproof import device_answers
from hypertrain.trainer.selfcheck import (
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
    "ChallengeOutcome",
    "SelfcheckConfig",
    "challenge_hashes",
    "device_class",
    "memory_answers",
    "one_challenge",
    "selfcheck",
    "workload_hash",
]


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
    devices: list[torch.device] | None = None,
    cfg: SelfcheckConfig = _DEFAULT_CONFIG,
    claim_bytes: int = MIN_CLAIM_BYTES,
) -> list[DeviceReport]:
    """The hardware report: one entry per device, each claiming ``claim_bytes`` of memory
    (what the admission challenge makes it prove; never more than the device has)."""
    reports = []
    for index, device in enumerate(devices or local_devices()):
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
        reports.append(
            DeviceReport(
                index=index,
                name=(name or "cpu")[:128],
                device_class=device_class(device)[:128],
                memory_bytes=min(claim_bytes, device_memory(device) or claim_bytes),
                workload_hash=workload_hash(device, cfg),
            )
        )
    return reports


def _each_device(chosen: list[torch.device], work: Any) -> list[Any]:
    """``work(index, device)`` on every device at once (the deadline is sized to one)."""
    if len(chosen) == 1:
        return [work(0, chosen[0])]
    with ThreadPoolExecutor(max_workers=len(chosen)) as pool:
        return list(pool.map(work, range(len(chosen)), chosen))


def challenge_hashes(seed: int, steps: int, devices: list[torch.device] | None = None) -> list[str]:
    """The workload hash on every device for an admission challenge's seed, in order."""
    cfg = SelfcheckConfig(seed=seed, steps=steps)
    return _each_device(devices or local_devices(), lambda _i, d: workload_hash(d, cfg))


def memory_answers(
    seed: int, claims: list[int], devices: list[torch.device] | None = None
) -> list[list[str]]:
    """Each device's memory-proof answers for its own claim, devices in parallel."""
    chosen = devices or local_devices()
    if len(claims) != len(chosen):
        raise ValueError(f"{len(claims)} memory claims for {len(chosen)} devices")
    return _each_device(chosen, lambda i, d: device_answers(seed, i, claims[i], d))


@dataclass(frozen=True, slots=True)
class ChallengeOutcome:
    """One admission challenge as this island saw it.

    ``status`` is the challenge's last status (decided, or what was seen when the wait ran
    out); ``late`` is True when the service refused the answer as posted after its
    deadline (its code ``late``): the one refusal a fresh challenge may cure."""

    status: AdmissionStatus
    late: bool


def one_challenge(
    service: ChallengeClient,
    key: Hotkey,
    run_id: str,
    *,
    devices: list[torch.device] | None = None,
    poll_s: float = 1.0,
    timeout_s: float = 600.0,
    expiry_margin: int = 50,
    sleep: Callable[[float], None] = time.sleep,
) -> ChallengeOutcome:
    """Wait for the challenge seed, run the workload on every device, post the answer,
    then wait for a worker's decision; say also whether the answer was refused as late.

    The status is the challenge's: ``admitted`` or ``refused`` (with its reason) once
    decided, else the last status seen when ``timeout_s`` ran out (``pending`` or
    ``answered``: a worker of the island's device class has not checked it yet).
    ``sleep`` is the wait between two polls (tests pass one that moves their beacon)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = service.admission_status(run_id, key.ss58_address)
        if status.status != "pending":
            return ChallengeOutcome(status, late=False)
        if status.seed is not None:
            break
        if time.monotonic() > deadline:
            return ChallengeOutcome(status, late=False)
        sleep(poll_s)
    late = _post_answer(service, key, run_id, status, devices, expiry_margin)
    while True:
        status = service.admission_status(run_id, key.ss58_address)
        if status.status in DECIDED or time.monotonic() > deadline:
            return ChallengeOutcome(status, late=late)
        sleep(poll_s)


def _post_answer(
    service: ChallengeClient,
    key: Hotkey,
    run_id: str,
    status: AdmissionStatus,
    devices: list[torch.device] | None,
    expiry_margin: int,
) -> bool:
    """Compute and post the answer to a seeded challenge; True when refused as late.

    The service alone judges lateness (by its beacon clock), so the answer is always
    posted: a late one refuses this challenge (and starts the hotkey's backoff)."""
    assert status.seed is not None  # only a seeded challenge is answered
    hashes = challenge_hashes(status.seed, status.workload_steps, devices)
    memory = memory_answers(status.seed, status.memory_claims, devices)
    body = AdmissionAnswer(seed_beacon_round=status.seed_beacon_round, hashes=hashes, memory=memory)
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
        return exc.code == "late"
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hypertrain.miner.admission")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("selfcheck", help="run the workload on every device (the report)")
    run.add_argument("--out", type=Path, help="also write the JSON report to this file")
    run.add_argument(
        "--claim-mib", type=int, default=MIN_CLAIM_BYTES >> 20, help="memory claimed per device"
    )
    args = parser.parse_args(argv)
    reports = selfcheck(claim_bytes=args.claim_mib << 20)
    doc: dict[str, Any] = {"devices": [r.model_dump(mode="json") for r in reports]}
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if args.out is not None:
        args.out.write_text(text)
    sys.stdout.write(text)
    return 0 if len({r.workload_hash for r in reports}) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
