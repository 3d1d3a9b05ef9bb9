"""Traffic arithmetic: what data-parallel training would send, and the honest saving.

The reference is synchronous data-parallel training with a bf16 gradient all-reduce
after every step over a ring of ``n`` devices. A ring all-reduce of ``B`` bytes makes
each device send (and receive) ``2 (n - 1) / n x B`` bytes, so for ``P`` parameters and
``S`` steps one device sends

    ddp_bytes_per_device = 2 (n - 1) / n x 2 P x S        (2 bytes per bf16 value)

and the ring as a whole ``n`` times that. One device alone (``n = 1``) sends nothing.
The network's side counts every byte an island really moves in a round: its commit,
its update, the checkpoints an audit asked for, and the start model it downloads.
"""

from __future__ import annotations

from collections.abc import Mapping

BF16_BYTES = 2


def ddp_bytes_per_device(params: int, devices: int, steps: int) -> int:
    """Bytes one device sends in ``steps`` bf16 ring all-reduces of ``params`` gradients."""
    if devices < 1 or params < 0 or steps < 0:
        raise ValueError(f"bad traffic inputs: {params} params, {devices} devices, {steps} steps")
    return (2 * (devices - 1) * BF16_BYTES * params * steps) // devices


def ddp_bytes_total(params: int, devices: int, steps: int) -> int:
    """Bytes the whole ring sends: ``devices`` x :func:`ddp_bytes_per_device`."""
    return devices * ddp_bytes_per_device(params, devices, steps)


def honest_ratio(ddp_bytes: int, moved: Mapping[str, int]) -> float | None:
    """``ddp_bytes / sum(moved)``; None when nothing moved (no ratio to state)."""
    total = sum(moved.values())
    return ddp_bytes / total if total else None


FORMULA = "data-parallel bytes = islands x 2(n-1)/n x 2 B x params x H per round (bf16 ring)"
