"""The training state and its canonical byte stream, whose tagged SHA-256 is the state hash.

A :class:`TrainState` is everything that affects the future of training: the global
step counter, the parameters, the optimizer state and (with error feedback) the
compression residual, as one flat ``name -> float32 tensor`` map in the canonical
order of :func:`state_layout`. The byte stream (docs/protocol-trainer.md) is

    magic "HTSTATE1" | u32 version | 32-byte config digest | u64 step | u32 count
    then per tensor: u16 name length | name (UTF-8) | u8 dtype code | u8 ndim |
                     u64 dims... | raw little-endian C-order element bytes

all integers little-endian; the state hash is ``tagged_hash(STATE, stream)``. The
config digest binds the state to the model shape, optimizer kind and residual switch,
so a state can never be loaded into another configuration.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from hypertrain.protocol import domains
from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.manifest import InnerOptimSpec, ModelSpec
from hypertrain.trainer.model import init_params, param_shapes
from hypertrain.trainer.optim import slot_names

MAGIC = b"HTSTATE1"
VERSION = 1
HEADER = struct.Struct("<8sI32sQI")
DTYPE_CODES: dict[torch.dtype, int] = {torch.float32: 1, torch.bfloat16: 2, torch.float16: 3}
CODE_DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}
RESIDUAL_PREFIX = "residual."
assert sys.byteorder == "little", "byte formats assume a little-endian host"


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """Expected name, shape and dtype of one state tensor."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32


@dataclass(frozen=True, slots=True)
class StateConfig:
    """What fixes the state's layout: model shape, optimizer kind, residual switch."""

    model: ModelSpec
    inner: InnerOptimSpec
    error_feedback: bool = False

    def layout(self) -> list[TensorSpec]:
        return state_layout(self.model, self.inner, self.error_feedback)

    def digest(self) -> bytes:
        doc = {
            "model": self.model.model_dump(mode="json"),
            "optimizer": self.inner.name,
            "error_feedback": self.error_feedback,
        }
        return hashlib.sha256(canonical_bytes(doc)).digest()


@dataclass(frozen=True, slots=True)
class TrainState:
    """Global step counter plus every state tensor, in canonical order."""

    step: int
    tensors: dict[str, Tensor]
    config_digest: bytes

    def params(self) -> dict[str, Tensor]:
        """The model parameters only (no optimizer state, no residual)."""
        return {
            k: v
            for k, v in self.tensors.items()
            if not k.startswith("optim.") and not k.startswith(RESIDUAL_PREFIX)
        }

    def clone(self) -> TrainState:
        return TrainState(
            self.step, {k: v.detach().clone() for k, v in self.tensors.items()}, self.config_digest
        )

    def state_hash(self) -> bytes:
        return state_hash(self)


def state_layout(model: ModelSpec, inner: InnerOptimSpec, error_feedback: bool) -> list[TensorSpec]:
    """Parameters, then optimizer slots in parameter order, then residuals."""
    shapes = param_shapes(model)
    layout = [TensorSpec(name, shape) for name, shape in shapes]
    for name, shape in shapes:
        layout += [TensorSpec(slot, shape) for slot in slot_names(name, shape, inner)]
    if error_feedback:
        layout += [TensorSpec(RESIDUAL_PREFIX + name, shape) for name, shape in shapes]
    return layout


def init_state(config: StateConfig, seed: int) -> TrainState:
    """Step 0: fresh parameters from ``seed``, zero optimizer state and residual."""
    params = init_params(config.model, seed)
    tensors = {
        spec.name: params[spec.name] if spec.name in params else torch.zeros(spec.shape)
        for spec in config.layout()
    }
    return TrainState(0, tensors, config.digest())


def tensor_bytes(t: Tensor) -> memoryview:
    """Raw little-endian bytes of a tensor without copying when it is already contiguous."""
    c = t.detach().cpu().contiguous()
    if c.dtype == torch.bfloat16:
        c = c.view(torch.int16)
    arr: Any = c.numpy()
    return memoryview(arr).cast("B")


def tensor_header(name: str, t: Tensor) -> bytes:
    encoded = name.encode("utf-8")
    dims = struct.pack(f"<{t.ndim}Q", *t.shape)
    return struct.pack("<H", len(encoded)) + encoded + bytes([DTYPE_CODES[t.dtype], t.ndim]) + dims


def stream_chunks(state: TrainState) -> Iterator[bytes | memoryview]:
    """The canonical byte stream of ``state``, in pieces (tensor data is not copied)."""
    yield HEADER.pack(MAGIC, VERSION, state.config_digest, state.step, len(state.tensors))
    for name, t in state.tensors.items():
        yield tensor_header(name, t)
        yield tensor_bytes(t)


def state_hash(state: TrainState) -> bytes:
    """``tagged_hash(STATE, canonical stream)``: 32 bytes."""
    hasher = domains.tagged_hasher(domains.STATE)
    for chunk in stream_chunks(state):
        hasher.update(chunk)
    return hasher.digest()
