"""The referee's work: one aten operation on agreed inputs, nothing more.

:func:`recompute` rebuilds the operation's tensors from the ``opinputs`` bytes (whose
digests the service already checked), rebuilds its arguments from the canonical JSON
both parties signed, runs the operation and returns the digests of its tensor outputs.
"""

from __future__ import annotations

import json
from typing import Any

import torch
from torch import Tensor
from torch.utils._pytree import tree_flatten

from hypertrain.dispute import opinputs
from hypertrain.dispute.errors import DisputeError
from hypertrain.dispute.messages import OpEntry
from hypertrain.trainer.tracing import tensor_digest

_KINDS: dict[str, type] = {
    "dtype": torch.dtype,
    "device": torch.device,
    "layout": torch.layout,
    "memory_format": torch.memory_format,
}


class RecomputeError(DisputeError):
    code = "cannot_recompute"


def resolve_op(name: str) -> Any:
    """``aten.mm.default`` -> ``torch.ops.aten.mm.default``; only the aten namespace."""
    parts = name.split(".")
    if len(parts) != 3 or parts[0] != "aten":
        raise RecomputeError(f"not an aten operation: {name!r}")
    try:
        return getattr(getattr(torch.ops.aten, parts[1]), parts[2])
    except AttributeError as exc:
        raise RecomputeError(f"unknown operation {name!r}") from exc


def to_tensor(raw: opinputs.RawTensor) -> Tensor:
    dtype = getattr(torch, raw.dtype.removeprefix("torch."))
    store = torch.int16 if dtype == torch.bfloat16 else dtype
    flat = (
        torch.frombuffer(bytearray(raw.data), dtype=store)
        if raw.data
        else torch.empty(0, dtype=store)
    )
    return flat.view(dtype).reshape(raw.shape).clone()


def _decode(x: Any, tensors: list[Tensor]) -> Any:
    if isinstance(x, list):
        return [_decode(v, tensors) for v in x]
    if isinstance(x, dict):
        tagged = [k for k in x if k.startswith("$")]
        if not tagged:
            return {k: _decode(v, tensors) for k, v in x.items()}
        tag, value = tagged[0][1:], x[tagged[0]]
        if tag == "t" and isinstance(value, int) and 0 <= value < len(tensors):
            return tensors[value]
        if tag == "f":
            return float(value)
        if tag in _KINDS:
            return _named(tag, str(value))
        raise RecomputeError(f"argument {x!r} cannot be rebuilt")
    return x


def _named(kind: str, text: str) -> Any:
    if kind == "device":
        return torch.device(text)
    value = getattr(torch, text.removeprefix("torch."), None)
    if not isinstance(value, _KINDS[kind]):
        raise RecomputeError(f"unknown {kind} {text!r}")
    return value


def recompute(entry: OpEntry, data: bytes) -> list[str]:
    """Digests of the outputs of ``entry``'s operation on the tensors in ``data``."""
    tensors = [to_tensor(t) for t in opinputs.check_inputs(data, entry.inputs)]
    args, kwargs = _decode(json.loads(entry.args), tensors)
    func = resolve_op(entry.op)
    try:
        out = func(*args, **kwargs)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise RecomputeError(f"{entry.op} failed on the agreed inputs: {exc}") from exc
    return [tensor_digest(t) for t in tree_flatten(out)[0] if isinstance(t, Tensor)]
