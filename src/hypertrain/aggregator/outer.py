"""The outer optimizer: Nesterov momentum on the averaged pseudo-gradient, and its state.

With ``delta`` the merged pseudo-gradient (start minus end, a descent direction like
a gradient), learning rate ``lr`` and momentum ``mu`` (the manifest's outer section)::

    m'     = mu * m + delta
    theta' = theta - lr * (delta + mu * m')     (nesterov)
    theta' = theta - lr * m'                    (plain heavy ball)

This is PyTorch's SGD-with-Nesterov convention, as DiLoCo uses it. Each line is a
chain of separate elementwise float32 kernels (no fused multiply-add, no
reduction), so the bytes do not depend on thread count or vector width.

The momentum persists across rounds in an *outer-state blob*: safetensors of
``momentum.<param>`` tensors with metadata naming the format, the model digest and
the round that produced it. It is addressed by SHA-256 like every blob and its hash
is recorded in the round's tape; round 0 starts from zero momentum (no blob).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from torch import Tensor

from hypertrain.aggregator.errors import AggregatorError
from hypertrain.protocol.manifest import ModelSpec, OuterOptimSpec
from hypertrain.trainer.blob import encode_safetensors, model_digest
from hypertrain.trainer.model import param_shapes

FORMAT = "hypertrain-outer/1"
PREFIX = "momentum."


def nesterov_step(
    theta: Tensor, delta: Tensor, momentum: Tensor, outer: OuterOptimSpec
) -> tuple[Tensor, Tensor]:
    """(new parameters, new momentum) for one tensor; inputs are not modified."""
    lr = torch.tensor(outer.lr, dtype=torch.float32)
    mu = torch.tensor(outer.momentum, dtype=torch.float32)
    new_m = torch.add(torch.mul(momentum, mu), delta)
    step = torch.add(delta, torch.mul(new_m, mu)) if outer.nesterov else new_m
    return torch.sub(theta, torch.mul(step, lr)), new_m


def zero_momentum(spec: ModelSpec) -> dict[str, Tensor]:
    return {name: torch.zeros(shape) for name, shape in param_shapes(spec)}


def encode_outer_state(momentum: Mapping[str, Tensor], spec: ModelSpec, round_index: int) -> bytes:
    """Safetensors bytes of the momentum after round ``round_index``'s merge."""
    tensors = {
        PREFIX + name: momentum[name].detach().to(torch.float32).contiguous()
        for name, _ in param_shapes(spec)
    }
    meta = {"format": FORMAT, "model_sha256": model_digest(spec), "round": str(round_index)}
    return encode_safetensors(tensors, meta)


def decode_outer_state(data: bytes, spec: ModelSpec) -> tuple[dict[str, Tensor], int]:
    """(momentum by parameter name, round) from an outer-state blob, fully checked."""
    try:
        loaded = st_load(data)
        header_len = int.from_bytes(data[:8], "little")
        meta = json.loads(data[8 : 8 + header_len]).get("__metadata__") or {}
    except (SafetensorError, ValueError, AttributeError) as exc:
        raise AggregatorError(f"outer-state blob is not valid safetensors: {exc}") from None
    if meta.get("format") != FORMAT or meta.get("model_sha256") != model_digest(spec):
        raise AggregatorError("outer-state blob is for another model (or not an outer state)")
    out: dict[str, Tensor] = {}
    shapes = param_shapes(spec)
    if set(loaded) != {PREFIX + n for n, _ in shapes}:
        raise AggregatorError("outer-state tensor names do not match the model")
    for name, shape in shapes:
        t = loaded[PREFIX + name]
        if t.dtype != torch.float32 or tuple(t.shape) != shape:
            raise AggregatorError(f"outer state {name}: {t.dtype} {tuple(t.shape)}")
        if not bool(torch.isfinite(t).all()):
            raise AggregatorError(f"outer state {name} contains NaN or Inf")
        out[name] = t
    return out, int(meta.get("round", "0"))
