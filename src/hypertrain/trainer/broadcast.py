"""The start-model broadcast: the merged outer step, encoded, and the rebuild from it.

An island that holds round ``r``'s start model does not download round ``r + 1``'s
(4 bytes a parameter): it receives the merge's *broadcast*, the outer step

    step = start - merged                      (float32, per tensor, canonical order)

encoded exactly like an update (``trainer.codec``, the run's ``block_size``, at the width
``outer.broadcast`` names: about one byte a parameter at int8, half at int4; entropy coded
when the run's updates are, ``compression.entropy``), and rebuilds

    new = start - decode(encode(step))         (one elementwise float32 subtraction)

For the rebuild to be the aggregator's model bit for bit, the aggregator does not
publish the float32 ``merged``: it publishes ``new`` itself, the model *is* the start
model minus the decoded broadcast (:func:`broadcast_step`), and the merge tape's
``new_model_sha256`` is the hash of that model's blob. Every operation is elementwise
float32 (the codec's quantize and decode, one subtraction), so both sides compute the
same bytes on any machine. The quantization error of the step (at most half a code
level of each block's absmax) is not carried over; the outer momentum keeps the exact
step. An island checks the rebuilt blob's hash against the signed merge-tape message
before training (:func:`rebuild_model`) and refuses a broadcast that does not rebuild
it with :class:`BroadcastError`; a joining or lagging island downloads the full model.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from hypertrain.protocol.manifest import ModelSpec
from hypertrain.trainer.blob import blob_hash, encode_model_blob
from hypertrain.trainer.codec import check_format, decode_quantized, encode_quantized, parse_header
from hypertrain.trainer.errors import CheckpointError, CodecError
from hypertrain.trainer.model import param_shapes


class BroadcastError(CheckpointError):
    """A broadcast is malformed, for another model, or does not rebuild the merged model."""


def _apply(
    start: Mapping[str, Tensor], decoded: Mapping[str, Tensor], spec: ModelSpec
) -> dict[str, Tensor]:
    return {name: torch.sub(start[name], decoded[name]) for name, _ in param_shapes(spec)}


def broadcast_step(
    start: Mapping[str, Tensor],
    merged: Mapping[str, Tensor],
    spec: ModelSpec,
    block_size: int,
    bits: int = 8,
    entropy: bool = False,
) -> tuple[bytes, dict[str, Tensor]]:
    """(broadcast bytes, the new model) for the move from ``start`` to ``merged``."""
    step = {
        name: torch.sub(start[name].float(), merged[name].float()) for name, _ in param_shapes(spec)
    }
    data = encode_quantized(step, block_size, bits, entropy)
    return data, _apply(start, decode_quantized(data, param_shapes(spec)), spec)


def decode_broadcast(
    data: bytes, spec: ModelSpec, block_size: int, bits: int = 8, entropy: bool = False
) -> dict[str, Tensor]:
    """The decoded step, refusing another block size, width or coding, another model's
    shapes or bad bytes."""
    try:
        header_block, _, _ = parse_header(data)
        if header_block != block_size:
            raise BroadcastError(f"broadcast block size {header_block}, the run's is {block_size}")
        check_format(data, bits, entropy)
        return decode_quantized(data, param_shapes(spec))
    except CodecError as exc:
        raise BroadcastError(f"broadcast is not a valid int{bits} step: {exc}") from None


def rebuild_model(
    start: Mapping[str, Tensor],
    data: bytes,
    spec: ModelSpec,
    block_size: int,
    expected_sha256: str,
    bits: int = 8,
    entropy: bool = False,
) -> tuple[bytes, dict[str, Tensor]]:
    """(model blob, parameters) rebuilt from ``start`` and a broadcast, verified against
    the merge's ``expected_sha256``; :class:`BroadcastError` when they differ."""
    params = _apply(start, decode_broadcast(data, spec, block_size, bits, entropy), spec)
    blob = encode_model_blob(params, spec)
    if blob_hash(blob) != expected_sha256:
        raise BroadcastError(
            f"the broadcast rebuilds model {blob_hash(blob)[:16]}…, the merge tape says"
            f" {expected_sha256[:16]}…"
        )
    return blob, params
