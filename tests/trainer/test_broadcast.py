"""The start-model broadcast rebuilds the merged model bit for bit, and refuses tampering."""

from __future__ import annotations

import hashlib

import pytest
import torch

from hypertrain.trainer.blob import blob_hash, encode_model_blob
from hypertrain.trainer.broadcast import (
    BroadcastError,
    broadcast_step,
    decode_broadcast,
    rebuild_model,
)
from hypertrain.trainer.codec import HEADER
from hypertrain.trainer.model import init_params, param_shapes
from hypertrain.trainer.presets import PRESETS

SPEC = PRESETS["tiny"]
BLOCK = 64


def _moved() -> tuple[dict[str, torch.Tensor], bytes, dict[str, torch.Tensor]]:
    """(start, broadcast, the aggregator's new model) for an outer step of ~1e-3."""
    start = init_params(SPEC, 3)
    g = torch.Generator().manual_seed(5)
    target = {n: t - 1e-3 * torch.randn(t.shape, generator=g) for n, t in start.items()}
    data, new = broadcast_step(start, target, SPEC, BLOCK)
    return start, data, new


def test_rebuild_is_the_aggregators_model_bit_for_bit() -> None:
    start, data, new = _moved()
    sha = hashlib.sha256(encode_model_blob(new, SPEC)).hexdigest()
    blob, rebuilt = rebuild_model(start, data, SPEC, BLOCK, sha)
    assert hashlib.sha256(blob).hexdigest() == sha
    assert all(torch.equal(rebuilt[n], new[n]) for n, _ in param_shapes(SPEC))
    # about one byte a parameter (plus block scales and names): under a third of float32
    params = sum(t.numel() for t in start.values())
    assert params < len(data) < 0.3 * 4 * params


def test_a_zero_step_keeps_the_model() -> None:
    start = init_params(SPEC, 3)
    _, new = broadcast_step(start, start, SPEC, BLOCK)
    assert all(torch.equal(new[n], start[n]) for n in start)


def test_a_tampered_broadcast_is_refused() -> None:
    start, data, new = _moved()
    sha = hashlib.sha256(encode_model_blob(new, SPEC)).hexdigest()
    tampered = bytearray(data)
    tampered[-1] = (tampered[-1] + 1) % 127  # one int8 code of the last tensor
    with pytest.raises(BroadcastError, match="the merge tape says"):
        rebuild_model(start, bytes(tampered), SPEC, BLOCK, sha)
    other_start = init_params(SPEC, 4)  # right broadcast, wrong held model
    with pytest.raises(BroadcastError, match="the merge tape says"):
        rebuild_model(other_start, data, SPEC, BLOCK, sha)


def test_malformed_broadcasts_are_refused() -> None:
    _, data, _ = _moved()
    with pytest.raises(BroadcastError, match="not a valid int8 step"):
        decode_broadcast(data[:-1], SPEC, BLOCK)
    with pytest.raises(BroadcastError, match="block size"):
        decode_broadcast(data, SPEC, 128)
    other = PRESETS["proxy"]
    with pytest.raises(BroadcastError, match="not a valid int8 step"):
        decode_broadcast(data, other, BLOCK)
    with pytest.raises(BroadcastError):
        decode_broadcast(b"HTQ8" + bytes(HEADER.size), SPEC, BLOCK)
    with pytest.raises(BroadcastError, match="8-bit codes, the run's are 4-bit"):
        decode_broadcast(data, SPEC, BLOCK, bits=4)


def test_a_four_bit_broadcast_rebuilds_the_merged_model() -> None:
    start = init_params(SPEC, seed=1)
    merged = {k: v - 0.01 * torch.randn_like(v) for k, v in start.items()}
    data, new = broadcast_step(start, merged, SPEC, BLOCK, bits=4)
    assert data[:4] == b"HTQ4"
    sha = blob_hash(encode_model_blob(new, SPEC))
    blob, params = rebuild_model(start, data, SPEC, BLOCK, sha, bits=4)
    assert blob_hash(blob) == sha and all(torch.equal(params[k], new[k]) for k in new)
    with pytest.raises(BroadcastError, match="4-bit codes, the run's are 8-bit"):
        rebuild_model(start, data, SPEC, BLOCK, sha)


@pytest.mark.parametrize("bits", [4, 2])
def test_an_entropy_coded_broadcast_rebuilds_the_same_model(bits: int) -> None:
    start = init_params(SPEC, seed=1)
    merged = {k: v - 0.01 * torch.randn_like(v) for k, v in start.items()}
    plain, new = broadcast_step(start, merged, SPEC, BLOCK, bits=bits)
    coded, coded_new = broadcast_step(start, merged, SPEC, BLOCK, bits=bits, entropy=True)
    assert coded[:4] == f"HTE{bits}".encode() and len(coded) < len(plain)
    assert all(torch.equal(coded_new[k], new[k]) for k in new)  # lossless: the same model
    sha = blob_hash(encode_model_blob(new, SPEC))
    blob, _ = rebuild_model(start, coded, SPEC, BLOCK, sha, bits=bits, entropy=True)
    assert blob_hash(blob) == sha
    with pytest.raises(BroadcastError, match="codes entropy coded, the run's are not"):
        rebuild_model(start, coded, SPEC, BLOCK, sha, bits=bits)
    with pytest.raises(BroadcastError, match="codes not entropy coded, the run's are"):
        rebuild_model(start, plain, SPEC, BLOCK, sha, bits=bits, entropy=True)
