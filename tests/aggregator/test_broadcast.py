"""A broadcasting run: the merged model is the start model minus the decoded broadcast."""

from __future__ import annotations

import pytest

from hypertrain.aggregator.merge import merge
from hypertrain.aggregator.tape import decode_tape
from hypertrain.aggregator.verify import verify_tape
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.broadcast import BroadcastError, rebuild_model
from tests.aggregator.helpers import World


def _world(**outer: object) -> World:
    w = World(**outer)
    for i in range(3):
        w.add(i, tokens=50 + 40 * i)
    return w


def test_an_island_rebuilds_the_merged_model_and_verify_tape_agrees() -> None:
    w = _world(broadcast="int8")
    result = merge(w.inputs(), w.blobs)
    assert result.broadcast_blob is not None
    start = decode_model_blob(w.blobs.get(w.start_sha), w.manifest.model)
    blob, _ = rebuild_model(
        start, result.broadcast_blob, w.manifest.model, 64, result.tape.new_model_sha256
    )
    assert blob == result.model_blob  # bit for bit, from a quarter of the bytes
    assert len(result.broadcast_blob) < len(result.model_blob) // 3
    assert verify_tape(decode_tape(result.tape.to_bytes()), w.blobs).identical


def test_the_broadcast_changes_the_model_only_by_its_quantization() -> None:
    exact = merge(_world().inputs(), _world().blobs)
    w = _world(broadcast="int8")
    quantized = merge(w.inputs(), w.blobs)
    assert exact.broadcast_blob is None  # a run without the field publishes the model only
    assert quantized.tape.new_outer_state_sha256 == exact.tape.new_outer_state_sha256
    a = decode_model_blob(exact.model_blob, w.manifest.model)
    b = decode_model_blob(quantized.model_blob, w.manifest.model)
    start = decode_model_blob(w.blobs.get(w.start_sha), w.manifest.model)
    for name in a:
        step = (start[name] - a[name]).abs().max()
        assert (a[name] - b[name]).abs().max() <= step / 127  # half a level, with margin


def test_a_tampered_broadcast_is_refused_before_training() -> None:
    w = _world(broadcast="int8")
    result = merge(w.inputs(), w.blobs)
    assert result.broadcast_blob is not None
    tampered = bytearray(result.broadcast_blob)
    tampered[len(tampered) // 2] ^= 0x01
    start = decode_model_blob(w.blobs.get(w.start_sha), w.manifest.model)
    with pytest.raises(BroadcastError):
        rebuild_model(start, bytes(tampered), w.manifest.model, 64, result.tape.new_model_sha256)
