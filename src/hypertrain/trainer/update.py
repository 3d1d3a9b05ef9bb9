"""The pseudo-gradient of a round and its compressed update, with optional error feedback.

``delta = theta_round_start - theta_after_H`` per parameter. Without error feedback
the update is ``encode_quantized(delta)`` at the run's ``compression.bits`` (8, 4 or 2;
entropy coded with ``compression.entropy``; or ``encode_sparse`` when the manifest's
``compression.sparse`` is set). With
``compression.error_feedback`` the island encodes ``delta + residual`` and keeps
``residual' = (delta + residual) - decoded`` for the next round, so quantisation error
is re-sent later instead of lost (with ``compression.error_feedback_decay`` below 1,
SparseLoCo's accumulator: ``delta + decay * residual``). The residual
is part of the training state (``residual.<param>``), hence of every state hash, so an
auditor replaying the final segment can re-encode and compare the update hash.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from hypertrain.protocol.manifest import CompressionSpec
from hypertrain.trainer.codec import (
    code_format,
    decode_quantized,
    encode_quantized,
    iter_decode,
    relative_l2,
    update_hash,
)
from hypertrain.trainer.errors import CodecError
from hypertrain.trainer.sparse_codec import (
    SparseParams,
    decode_sparse,
    encode_sparse,
    is_sparse,
    iter_decode_sparse,
)
from hypertrain.trainer.state import RESIDUAL_PREFIX, TrainState


@dataclass(frozen=True, slots=True)
class EncodedUpdate:
    data: bytes
    digest: bytes  # tagged_hash(UPDATE, data)
    relative_l2_error: float
    residual: dict[str, Tensor] | None  # next round's residual (error feedback only)
    num_elements: int

    @property
    def ratio_vs_fp32(self) -> float:
        return len(self.data) / (4 * self.num_elements)

    @property
    def ratio_vs_bf16(self) -> float:
        return len(self.data) / (2 * self.num_elements)


def pseudo_gradient(start: Mapping[str, Tensor], end: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """``start - end`` per tensor, in ``start``'s order."""
    return {name: start[name] - end[name] for name in start}


def sparse_params(compression: CompressionSpec) -> SparseParams | None:
    """The sparse codec parameters of a run, or None for int8."""
    sp = compression.sparse
    return None if sp is None else SparseParams(sp.chunk_size, sp.topk_per_chunk, sp.value_bits)


def encode_update(tensors: Mapping[str, Tensor], compression: CompressionSpec) -> bytes:
    """The canonical encoding of ``tensors`` under the run's codec."""
    params = sparse_params(compression)
    if params is None:
        return encode_quantized(
            tensors, compression.block_size, compression.bits, compression.entropy
        )
    return encode_sparse(tensors, params)


def decode_update(data: bytes, compression: CompressionSpec) -> dict[str, Tensor]:
    return dict(iter_decode_update(data, compression))


def iter_decode_update(
    data: bytes,
    compression: CompressionSpec,
    expected: Sequence[tuple[str, tuple[int, ...]]] | None = None,
) -> Iterator[tuple[str, Tensor]]:
    """Stream-decode an update, refusing one made with another codec than the run's."""
    params = sparse_params(compression)
    if (params is not None) != is_sparse(data) or (
        params is None and code_format(data) != (compression.bits, compression.entropy)
    ):
        coded = " entropy-coded" if compression.entropy else ""
        raise CodecError(f"update is not encoded with the run's {compression.codec}{coded} codec")
    if params is None:
        return iter_decode(data, expected)
    return iter_decode_sparse(data, expected, params)


def build_update(
    start_params: Mapping[str, Tensor], end: TrainState, compression: CompressionSpec
) -> EncodedUpdate:
    """Encode the round's pseudo-gradient (plus the carried residual with error feedback)."""
    target = pseudo_gradient(start_params, end.params())
    if compression.error_feedback:
        target = {
            k: v + carried(end.tensors[RESIDUAL_PREFIX + k], compression) for k, v in target.items()
        }
    data = encode_update(target, compression)
    params = sparse_params(compression)
    decoded = decode_quantized(data) if params is None else decode_sparse(data, params=params)
    residual = {k: target[k] - decoded[k] for k in target} if compression.error_feedback else None
    return EncodedUpdate(
        data=data,
        digest=update_hash(data),
        relative_l2_error=relative_l2(target, decoded),
        residual=residual,
        num_elements=sum(t.numel() for t in target.values()),
    )


def carried(residual: Tensor, compression: CompressionSpec) -> Tensor:
    """The part of the residual a round re-sends: all of it, or ``decay * residual`` (one
    correctly rounded float32 multiply, added to the round's delta as a separate operation,
    never fused, so every machine encodes the same bytes)."""
    decay = compression.error_feedback_decay
    return residual if decay == 1.0 else torch.mul(residual, decay)


def next_round_state(
    end: TrainState, merged_params: Mapping[str, Tensor], residual: Mapping[str, Tensor] | None
) -> TrainState:
    """Start state of the next round under the ``carry`` policy: merged params, same optimizer
    state and step counter, and the new residual when error feedback is on."""
    tensors = dict(end.tensors)
    for name, value in merged_params.items():
        if name not in tensors or tensors[name].shape != value.shape:
            raise ValueError(f"merged parameter {name!r} does not fit the state")
        tensors[name] = value.detach().float().clone()
    for name, value in (residual or {}).items():
        tensors[RESIDUAL_PREFIX + name] = value.detach().float().clone()
    return TrainState(end.step, tensors, end.config_digest)
