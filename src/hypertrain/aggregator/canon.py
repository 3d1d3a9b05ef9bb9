"""Byte-stable safetensors encoding for the blobs the aggregator publishes.

The ``safetensors`` library writes its ``__metadata__`` map in hash-map order, which
changes from one process to the next, so two honest runs of the same merge could
publish different bytes (and hashes). Here the header is RFC 8785 canonical JSON
(sorted keys, no spaces) padded with spaces to 8 bytes, and the tensor data follow
in the given order: the same tensors always give the same bytes, and any safetensors
reader loads them.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.manifest import ModelSpec
from hypertrain.trainer.blob import FORMAT as MODEL_FORMAT
from hypertrain.trainer.blob import model_digest
from hypertrain.trainer.model import param_shapes
from hypertrain.trainer.state import tensor_bytes


def encode(tensors: Mapping[str, Tensor], metadata: Mapping[str, str]) -> bytes:
    """Safetensors bytes of float32 ``tensors`` (in mapping order) with ``metadata``."""
    header: dict[str, object] = {"__metadata__": dict(metadata)}
    parts: list[bytes | memoryview] = []
    offset = 0
    for name, t in tensors.items():
        data = t.detach().to(torch.float32).contiguous().cpu()
        size = data.numel() * 4
        span = [offset, offset + size]
        header[name] = {"dtype": "F32", "shape": list(data.shape), "data_offsets": span}
        parts.append(tensor_bytes(data))
        offset += size
    raw = canonical_bytes(header)
    raw += b" " * (-len(raw) % 8)
    return b"".join([len(raw).to_bytes(8, "little"), raw, *parts])


def encode_model(params: Mapping[str, Tensor], spec: ModelSpec) -> bytes:
    """A model blob ``trainer.blob.decode_model_blob`` accepts, with stable bytes."""
    names = [name for name, _ in param_shapes(spec)]
    missing = [n for n in names if n not in params]
    if missing:
        raise ValueError(f"parameters missing from the model: {missing[:3]}")
    meta = {"format": MODEL_FORMAT, "model_sha256": model_digest(spec)}
    return encode({n: params[n] for n in names}, meta)
