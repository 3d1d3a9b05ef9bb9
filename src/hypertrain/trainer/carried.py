"""The carried state: what a ``carry`` round's start state holds that is not public.

Under ``carry`` an island starts round ``r`` from the merged model (public) with the step
counter, optimizer slots and, with error feedback, the residual its round ``r - 1`` left
(:func:`hypertrain.trainer.start_state.carried_of`). Those are all an auditor of round
``r`` needs from the island besides public records, so an audited island uploads them
alone, a third less than a whole training state with AdamW. The byte stream
(docs/protocol-trainer.md, "Carried state") is the state stream's header with magic
``HTCARRY1`` followed by the non-parameter tensors of the layout in layout order:

    magic "HTCARRY1" | u32 version | 32-byte config digest | u64 step | u32 count
    then per tensor: u16 name length | name (UTF-8) | u8 dtype code | u8 ndim |
                     u64 dims... | raw little-endian C-order element bytes

The optimizer slots are stored in the manifest's ``inner.carried_dtype`` (float32, or
bfloat16: :func:`carried_of` rounds them to nearest-even at the round's end, and the next
round starts from the rounded values on the island and in every replay alike); the step
counter is exact and an error-feedback residual stays float32. It has no hash trailer: its
relay address is its SHA-256, which the island's checkpoint index names
(``CheckpointIndex.carried``) and an audit of round ``r - 1`` checks against its replay.
Decoding validates everything before a tensor is built and raises
:class:`CheckpointError` for truncation, trailing bytes, a wrong magic or version,
another config, a layout that differs, and NaN/Inf.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from hypertrain.protocol.manifest import InnerOptimSpec
from hypertrain.trainer.checkpoint import (
    Reader,
    read_header,
    read_tensor_header,
    tensors_size,
    to_tensor,
)
from hypertrain.trainer.errors import CheckpointError
from hypertrain.trainer.state import (
    HEADER,
    RESIDUAL_PREFIX,
    VERSION,
    StateConfig,
    TensorSpec,
    tensor_bytes,
    tensor_header,
)

CARRIED_MAGIC = b"HTCARRY1"
SLOT_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(frozen=True, slots=True)
class CarriedState:
    """Step counter, optimizer slots and residual (no parameters), in layout order."""

    step: int
    tensors: dict[str, Tensor]
    config_digest: bytes


def is_carried(name: str) -> bool:
    """Whether a state tensor is carried (an optimizer slot or a residual), not a parameter."""
    return name.startswith(("optim.", RESIDUAL_PREFIX))


def slot_dtype(inner: InnerOptimSpec) -> torch.dtype:
    """The dtype a carried state holds the optimizer slots in (``inner.carried_dtype``)."""
    return SLOT_DTYPES[inner.carried_dtype]


def carried_layout(config: StateConfig) -> list[TensorSpec]:
    """The carried tensors of ``config``'s layout, in layout order, the optimizer slots in
    the run's carried width."""
    slots = slot_dtype(config.inner)
    return [
        TensorSpec(spec.name, spec.shape, slots) if spec.name.startswith("optim.") else spec
        for spec in config.layout()
        if is_carried(spec.name)
    ]


def carried_size(config: StateConfig) -> int:
    """The exact byte size of every carried state of ``config`` (a download limit)."""
    return HEADER.size + tensors_size(carried_layout(config))


def encode_carried(carried: CarriedState) -> bytes:
    """The carried state's byte stream (module docstring)."""
    count = len(carried.tensors)
    header = HEADER.pack(CARRIED_MAGIC, VERSION, carried.config_digest, carried.step, count)
    parts: list[bytes | memoryview] = [header]
    for name, t in carried.tensors.items():
        parts += [tensor_header(name, t), tensor_bytes(t)]
    return b"".join(bytes(p) for p in parts)


def decode_carried(data: bytes, config: StateConfig) -> CarriedState:
    """Parse and fully validate a carried state of ``config`` (module docstring)."""
    layout = carried_layout(config)
    step, digest = read_header(
        data, config, len(layout), magic=CARRIED_MAGIC, what="carried state", trailer=0
    )
    r = Reader(data, trailer=0, what="carried state")
    r.pos = HEADER.size
    spans = [(spec, r.take(read_tensor_header(r, spec), f"{spec.name} data")) for spec in layout]
    if r.pos != len(data):
        raise CheckpointError(f"carried state has {len(data) - r.pos} trailing bytes")
    return CarriedState(step, {spec.name: to_tensor(spec, buf) for spec, buf in spans}, digest)
