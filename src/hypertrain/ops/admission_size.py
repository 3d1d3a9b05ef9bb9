"""Sizing the admission challenge so that one device answers for one hotkey per window.

A join's answer costs its device the self-check workload (``workload_steps`` chained
matrix products) plus building and walking the memory table its claim names. Both must
be done between the seed round and the deadline, so one device can answer for at most

    hotkeys per device = floor(window_s / (workload_s + table_s_per_gib × claim_gib))

hotkeys per answer window, where ``window_s`` is the deadline in seconds (the class's
deadline, never more than ``answer_window_rounds × period_s``). With ``workload_steps``
sized so that the workload alone fills a share ``fill > 1/2`` of the window, that bound
is 1: one device answers for one hotkey after another at most once per window. Answers
run side by side (a GPU batches many 256 x 256 chains; a CPU runs one per core) are
bounded by memory instead: each needs its own table of the claimed size for the whole
answer, so a device holding ``memory`` answers for at most ``floor(memory / claim)``
hotkeys per window, and each of them is then admitted on exactly the memory it proved,
which sizes its budget (docs/mechanism.md, "What one device can answer for").

:func:`measure` times this device (the only part that depends on the machine);
:func:`size` and :func:`hotkeys_per_device` are the arithmetic, pure and tested.
``hypertrain run size-admission`` prints both as JSON.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Final

import torch

from hypertrain.protocol.memproof import MIN_CLAIM_BYTES
from hypertrain.trainer.memproof import build_table
from hypertrain.trainer.selfcheck import SelfcheckConfig, device_class, workload_hash

GIB: Final = 1 << 30
MAX_WORKLOAD_STEPS: Final = 1_000_000  # the manifest's bound on admission.workload_steps
PROBE_STEPS: Final = (8, 72)  # two workload lengths: their difference is the per-step cost
PROBE_TABLE_BYTES: Final = 64 << 20
PROBE_BATCH: Final = 32  # chains run side by side, as a farm answering many hotkeys would
REPEATS: Final = 3


class SizingError(ValueError):
    """The requested sizing cannot be met (a bad fill, window or measurement)."""


@dataclass(frozen=True, slots=True)
class DeviceCost:
    """What one answer costs one device of a class, as measured on it."""

    device_class: str
    s_per_step: float  # one workload step (a 256 x 256 float32 product and tanh)
    table_s_per_gib: float  # building one GiB of memory-proof table
    parallel: float  # chains the device runs side by side at one chain's speed (>= 1)


@dataclass(frozen=True, slots=True)
class Sizing:
    """The workload that fills ``fill`` of a window, and what it bounds."""

    device_class: str
    window_s: float
    fill: float
    workload_steps: int
    workload_s: float
    claim_gib: float
    answer_s: float  # workload plus the claim's table
    hotkeys_per_device: int  # answers one device fits in one window, one after another
    parallel: float
    hotkeys_by_compute: int  # answers per window with chains run side by side
    device_memory_bytes: int
    hotkeys_by_memory: int  # claims of this size the device holds at once
    hotkeys_bound: int  # the smaller of the two: what one device can be admitted for
    s_per_step: float
    table_s_per_gib: float

    def as_json(self) -> dict[str, float | int | str]:
        return asdict(self)


def _time(fn: Callable[[], object], repeats: int) -> float:
    """The fastest of ``repeats`` runs (the device's cost, not the machine's load)."""
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return min(out)


def measure(device: torch.device, repeats: int = REPEATS) -> DeviceCost:
    """Time the workload at two lengths and one table build on ``device``."""
    if repeats < 1:
        raise SizingError(f"repeats must be at least 1, got {repeats}")
    short, long = PROBE_STEPS
    t_short = _time(lambda: workload_hash(device, SelfcheckConfig(steps=short)), repeats)
    t_long = _time(lambda: workload_hash(device, SelfcheckConfig(steps=long)), repeats)
    per_step = (t_long - t_short) / (long - short)
    if per_step <= 0:  # a loaded machine timed the short run slower: take the long run whole
        per_step = t_long / long
    table = _time(lambda: build_table(1, PROBE_TABLE_BYTES, device), repeats)
    batched = _time(lambda: _batched_chains(device, PROBE_BATCH, long - short), repeats)
    return DeviceCost(
        device_class=device_class(device),
        s_per_step=per_step,
        table_s_per_gib=table * GIB / PROBE_TABLE_BYTES,
        parallel=max(1.0, PROBE_BATCH * (long - short) * per_step / batched),
    )


def _batched_chains(device: torch.device, batch: int, steps: int) -> None:
    """``batch`` workload chains as one batched product, with every thread the device
    has (the honest answer runs one chain on one thread)."""
    generator = torch.Generator(device="cpu").manual_seed(1)
    dim = SelfcheckConfig().dim
    x = torch.randn(batch, dim, dim, generator=generator).to(device)  # (B, D, D)
    w = (torch.randn(dim, dim, generator=generator) / dim**0.5).to(device)  # (D, D)
    for _ in range(steps):
        x = torch.tanh(x @ w) + 0.5 * x
    x.sum().item()  # waits for the device


def hotkeys_per_device(window_s: float, answer_s: float) -> int:
    """How many answers one device completes inside one window (0: not even one)."""
    if window_s <= 0 or answer_s <= 0:
        raise SizingError(f"window {window_s} s and answer {answer_s} s must be positive")
    return math.floor(window_s / answer_s)


def size(
    cost: DeviceCost,
    window_s: float,
    fill: float,
    claim_bytes: int = MIN_CLAIM_BYTES,
    device_memory_bytes: int = 0,
) -> Sizing:
    """``workload_steps`` whose workload alone takes ``fill`` of ``window_s`` on the
    measured device, and the hotkeys one device can then answer for per window."""
    if not 0 < fill < 1:
        raise SizingError(f"fill is a share of the window, strictly between 0 and 1, not {fill}")
    if window_s <= 0:
        raise SizingError(f"the window must be positive, not {window_s} s")
    if claim_bytes < MIN_CLAIM_BYTES:
        raise SizingError(f"a memory claim is at least {MIN_CLAIM_BYTES} bytes")
    steps = max(1, math.ceil(fill * window_s / cost.s_per_step - 1e-9))  # no float ulp step
    if steps > MAX_WORKLOAD_STEPS:
        raise SizingError(
            f"filling {fill:.0%} of {window_s} s needs {steps} steps on {cost.device_class},"
            f" above the manifest's bound of {MAX_WORKLOAD_STEPS}: shorten the window"
        )
    workload_s = steps * cost.s_per_step
    claim_gib = claim_bytes / GIB
    answer_s = workload_s + cost.table_s_per_gib * claim_gib
    if answer_s > window_s:
        raise SizingError(
            f"an answer takes {answer_s:.2f} s on {cost.device_class} (workload"
            f" {workload_s:.2f} s, table {answer_s - workload_s:.2f} s), more than the"
            f" {window_s} s window: lower the fill or the claim, or lengthen the window"
        )
    sequential = hotkeys_per_device(window_s, answer_s)
    by_compute = math.floor(sequential * cost.parallel)
    by_memory = device_memory_bytes // claim_bytes if device_memory_bytes else by_compute
    return Sizing(
        device_class=cost.device_class,
        window_s=window_s,
        fill=fill,
        workload_steps=steps,
        workload_s=workload_s,
        claim_gib=claim_gib,
        answer_s=answer_s,
        hotkeys_per_device=sequential,
        parallel=cost.parallel,
        hotkeys_by_compute=by_compute,
        device_memory_bytes=device_memory_bytes,
        hotkeys_by_memory=by_memory,
        hotkeys_bound=min(by_compute, by_memory),
        s_per_step=cost.s_per_step,
        table_s_per_gib=cost.table_s_per_gib,
    )
