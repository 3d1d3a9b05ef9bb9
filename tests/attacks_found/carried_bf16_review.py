"""Shared scenery of the bfloat16 carried-state review (test_carried_bf16_review_*).

A reference float32 -> bfloat16 rounding written with integer arithmetic only (no torch,
no floating-point unit), the bit patterns it is checked on, a ``carry`` world whose
optimizer slots are carried in bfloat16, and carried-state forgeries made on the bits.
No test lives here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer.carried import CarriedState, decode_carried, encode_carried
from hypertrain.trainer.segment import TrainConfig
from tests.attacks_found.carried_state_review import policy_world
from tests.auditor.islands import MemoryRelay
from tests.auditor.world import World

# low halves where round-to-nearest-even decides: exact, just under, at and just over the
# tie, and the largest; combined with every high half (every sign, exponent and mantissa)
TIE_LOWS = (0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xC000, 0xFFFF)


def rne_reference(bits: np.ndarray) -> np.ndarray:
    """float32 bit patterns (uint32, finite) -> bfloat16 bit patterns (uint16), rounded to
    nearest, ties to even, overflow to infinity: integer arithmetic only."""
    wide = bits.astype(np.uint64)
    lsb = (wide >> 16) & 1
    return (((wide + 0x7FFF + lsb) >> 16) & 0xFFFF).astype(np.uint16)


def probe_bits(seed: int = 0, random: int = 200_000) -> np.ndarray:
    """Every high half with each of :data:`TIE_LOWS`, plus random patterns; finite only."""
    high = np.arange(1 << 16, dtype=np.uint32) << 16
    lows = np.array(TIE_LOWS, dtype=np.uint32)
    grid = (high[:, None] | lows[None, :]).ravel()
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 1 << 32, size=random, dtype=np.uint64).astype(np.uint32)
    bits = np.concatenate([grid, noise])
    return bits[(bits & 0x7F800000) != 0x7F800000]  # finite float32 only


def as_float32(bits: np.ndarray) -> Tensor:
    return torch.from_numpy(bits.astype(np.uint32).view(np.float32).copy())


def bf16_bits(t: Tensor) -> np.ndarray:
    """The bit patterns of a bfloat16 tensor, as uint16."""
    return t.detach().contiguous().view(torch.int16).numpy().view(np.uint16).copy()


def from_bf16_bits(bits: np.ndarray, shape: tuple[int, ...]) -> Tensor:
    raw = torch.from_numpy(bits.astype(np.uint16).view(np.int16).copy())
    return raw.view(torch.bfloat16).reshape(shape)


def float32_bits(t: Tensor) -> np.ndarray:
    return t.detach().contiguous().view(torch.int32).numpy().view(np.uint32).copy()


def bf16_world(made: World, **policy: object) -> World:
    """``made`` under ``carry`` with its optimizer slots carried in bfloat16."""
    world = policy_world(made, **policy)  # type: ignore[arg-type]
    doc = world.manifest.model_dump(mode="json")
    doc["inner"]["carried_dtype"] = "bfloat16"
    return dataclasses.replace(world, manifest=RunManifest.model_validate(doc))


def forged_bits(
    relay: MemoryRelay, world: World, honest: str, change: Callable[[str, np.ndarray], np.ndarray]
) -> str:
    """A carried state made from ``honest`` (an address) with each optimizer slot's
    bfloat16 bit patterns ``change``d (encoded in bfloat16, as a bfloat16 run's are)."""
    config = TrainConfig.from_manifest(world.manifest).state_config()
    state = decode_carried(relay.blobs[honest], config)
    tensors: dict[str, Tensor] = {}
    for name, t in state.tensors.items():
        if name.startswith("optim."):
            assert t.dtype == torch.bfloat16
            bits = change(name, bf16_bits(t).ravel())
            tensors[name] = from_bf16_bits(bits, tuple(t.shape))
        else:
            tensors[name] = t
    return relay.put(encode_carried(CarriedState(state.step, tensors, state.config_digest)))
