"""The model blob: how a merged model travels between processes (relay, miner, auditor).

A blob is safetensors bytes of the parameters (float32, canonical names) with
metadata ``{"format": "hypertrain-model/1", "model_sha256": <digest of the ModelSpec>}``.
The bytes are stable: the ``safetensors`` library writes its header map in hash-map
order (different from one process to the next), so :func:`encode_safetensors` writes
the header itself as RFC 8785 canonical JSON padded with spaces to 8 bytes, followed by
the tensor data in the given order. Any safetensors reader loads the result.
It is addressed by its plain SHA-256, as every relay blob is; the reader recomputes
that hash before trusting anything. Decoding checks the digest, the exact set of
names, shapes and dtypes, and finiteness, raising :class:`CheckpointError`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

import torch
from safetensors import SafetensorError, deserialize
from safetensors.torch import load as st_load
from torch import Tensor

from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.manifest import ModelSpec
from hypertrain.trainer.errors import CheckpointError
from hypertrain.trainer.model import param_shapes
from hypertrain.trainer.state import tensor_bytes

FORMAT = "hypertrain-model/1"


def model_digest(spec: ModelSpec) -> str:
    """Hex SHA-256 of the canonical JSON of a model spec."""
    return hashlib.sha256(canonical_bytes(spec.model_dump(mode="json"))).hexdigest()


def encode_safetensors(tensors: Mapping[str, Tensor], metadata: Mapping[str, str]) -> bytes:
    """Byte-stable safetensors of float32 ``tensors`` (in mapping order) with ``metadata``."""
    header: dict[str, object] = {"__metadata__": dict(metadata)}
    parts: list[bytes | memoryview] = []
    offset = 0
    for name, t in tensors.items():
        data = t.detach().to(torch.float32).contiguous().cpu()
        size = data.numel() * 4
        header[name] = {
            "dtype": "F32",
            "shape": list(data.shape),
            "data_offsets": [offset, offset + size],
        }
        parts.append(tensor_bytes(data))
        offset += size
    raw = canonical_bytes(header)
    raw += b" " * (-len(raw) % 8)
    return b"".join([len(raw).to_bytes(8, "little"), raw, *parts])


def encode_model_blob(params: Mapping[str, Tensor], spec: ModelSpec) -> bytes:
    """Safetensors bytes of the parameters, in canonical order, with the spec's digest."""
    names = [name for name, _ in param_shapes(spec)]
    missing = [n for n in names if n not in params]
    if missing:
        raise CheckpointError(f"parameters missing from the model: {missing[:3]}")
    meta = {"format": FORMAT, "model_sha256": model_digest(spec)}
    return encode_safetensors({n: params[n] for n in names}, meta)


def blob_hash(data: bytes) -> str:
    """The blob's address: hex SHA-256 of its bytes."""
    return hashlib.sha256(data).hexdigest()


def _metadata(data: bytes) -> dict[str, str]:
    """The safetensors ``__metadata__`` after a full structural check of the layout."""
    if len(data) < 8 or int.from_bytes(data[:8], "little") > len(data) - 8:
        raise CheckpointError("model blob is truncated")
    header_len = int.from_bytes(data[:8], "little")
    try:
        meta = json.loads(data[8 : 8 + header_len]).get("__metadata__") or {}
        deserialize(data)  # type: ignore[no-untyped-call]
    except (SafetensorError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"model blob is not valid safetensors: {exc}") from None
    return meta if isinstance(meta, dict) else {}


def decode_model_blob(
    data: bytes, spec: ModelSpec, expected_sha256: str | None = None
) -> dict[str, Tensor]:
    """Parameters from a blob, refusing a wrong hash, another model, or bad tensors."""
    if expected_sha256 is not None and blob_hash(data) != expected_sha256:
        raise CheckpointError(f"model blob hash is not the expected {expected_sha256[:16]}…")
    meta = _metadata(data)
    if meta.get("format") != FORMAT or meta.get("model_sha256") != model_digest(spec):
        raise CheckpointError("model blob is for another model config (or not a model blob)")
    loaded = st_load(data)
    shapes = param_shapes(spec)
    if set(loaded) != {n for n, _ in shapes}:
        raise CheckpointError("model blob tensor names do not match the model")
    out: dict[str, Tensor] = {}
    for name, shape in shapes:
        t = loaded[name]
        if t.dtype != torch.float32 or tuple(t.shape) != shape:
            raise CheckpointError(f"{name}: {t.dtype} {tuple(t.shape)}, expected float32 {shape}")
        if not bool(torch.isfinite(t).all()):
            raise CheckpointError(f"{name} contains NaN or Inf")
        out[name] = t
    return out
