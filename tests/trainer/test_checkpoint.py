from __future__ import annotations

import struct
from pathlib import Path

import pytest
import torch

from hypertrain.protocol import domains
from hypertrain.protocol.manifest import InnerOptimSpec
from hypertrain.trainer.checkpoint import (
    checkpoint_size,
    decode_checkpoint,
    encode_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from hypertrain.trainer.errors import CheckpointError
from hypertrain.trainer.presets import PRESETS
from hypertrain.trainer.state import HEADER, StateConfig, TrainState, init_state, state_hash
from tests.trainer.conftest import make_config


@pytest.fixture
def config() -> StateConfig:
    return make_config().state_config()


@pytest.fixture
def state(config: StateConfig) -> TrainState:
    return init_state(config, 1)


def _rehash(body: bytes) -> bytes:
    return body + domains.tagged_hash(domains.STATE, body)


def test_round_trip_preserves_every_byte(state: TrainState, config: StateConfig) -> None:
    data = encode_checkpoint(state)
    back = decode_checkpoint(data, config, expected_hash=state_hash(state))
    assert back.step == state.step and list(back.tensors) == list(state.tensors)
    assert all(torch.equal(back.tensors[k], state.tensors[k]) for k in state.tensors)
    assert encode_checkpoint(back) == data
    assert data[-32:] == state_hash(state)


def test_save_and_load_file(state: TrainState, config: StateConfig, tmp_path: Path) -> None:
    digest = save_checkpoint(state, tmp_path / "ckpt.bin")
    assert load_checkpoint(tmp_path / "ckpt.bin", config).state_hash() == digest


def test_state_hash_covers_step_and_optimizer(state: TrainState) -> None:
    moved = TrainState(state.step + 1, state.tensors, state.config_digest)
    tensors = dict(state.tensors)
    tensors["optim.exp_avg.norm.weight"] = tensors["optim.exp_avg.norm.weight"] + 1e-30
    nudged = TrainState(state.step, tensors, state.config_digest)
    hashes = {state_hash(state), state_hash(moved), state_hash(nudged)}
    assert len(hashes) == 3


def test_truncated_checkpoint_is_refused(state: TrainState, config: StateConfig) -> None:
    data = encode_checkpoint(state)
    for cut in (10, HEADER.size + 5, len(data) // 2, len(data) - 1):
        with pytest.raises(CheckpointError, match=r"truncated|hash|trailing"):
            decode_checkpoint(data[:cut], config)
    with pytest.raises(CheckpointError, match="trailing"):
        decode_checkpoint(data[:-32] + b"\x00" + data[-32:], config)


def test_wrong_hash_is_refused(state: TrainState, config: StateConfig) -> None:
    data = bytearray(encode_checkpoint(state))
    data[HEADER.size + 40] ^= 0x01  # one bit inside the first tensor
    with pytest.raises(CheckpointError, match="does not match"):
        decode_checkpoint(bytes(data), config)
    with pytest.raises(CheckpointError, match="expected"):
        decode_checkpoint(encode_checkpoint(state), config, expected_hash=b"\x00" * 32)


def test_bad_magic_is_refused(state: TrainState, config: StateConfig) -> None:
    data = encode_checkpoint(state)
    with pytest.raises(CheckpointError, match="magic"):
        decode_checkpoint(b"X" + data[1:], config)


def test_other_model_config_is_refused(state: TrainState) -> None:
    data = encode_checkpoint(state)
    for other in (
        make_config(name="muon").state_config(),
        StateConfig(PRESETS["tiny-moe"], make_config().inner),
        StateConfig(PRESETS["tiny"].model_copy(update={"rope_theta": 500.0}), make_config().inner),
        StateConfig(PRESETS["tiny"], make_config().inner, error_feedback=True),
    ):
        with pytest.raises(CheckpointError, match="another model"):
            decode_checkpoint(data, other)


def _tamper_first_tensor(state: TrainState, tensor: torch.Tensor) -> bytes:
    """A checkpoint whose first tensor is replaced but whose hash is consistent."""
    tensors = dict(state.tensors)
    tensors["embed_tokens.weight"] = tensor
    return encode_checkpoint(TrainState(state.step, tensors, state.config_digest))


def test_wrong_shape_is_refused(state: TrainState, config: StateConfig) -> None:
    data = _tamper_first_tensor(state, torch.zeros(64, 31))
    with pytest.raises(CheckpointError, match="shape"):
        decode_checkpoint(data, config)


def test_wrong_dtype_is_refused(state: TrainState, config: StateConfig) -> None:
    data = _tamper_first_tensor(state, torch.zeros(64, 32, dtype=torch.bfloat16))
    with pytest.raises(CheckpointError, match="dtype"):
        decode_checkpoint(data, config)


def test_wrong_tensor_name_is_refused(state: TrainState, config: StateConfig) -> None:
    data = bytearray(encode_checkpoint(state))
    offset = HEADER.size + 2
    assert data[offset : offset + 5] == b"embed"
    data[offset] = ord("E")
    with pytest.raises(CheckpointError, match="expected tensor"):
        decode_checkpoint(_rehash(bytes(data[:-32])), config)


def test_nan_and_inf_are_refused(state: TrainState, config: StateConfig) -> None:
    for bad in (float("nan"), float("inf")):
        tensor = state.tensors["embed_tokens.weight"].clone()
        tensor[3, 4] = bad
        with pytest.raises(CheckpointError, match="NaN or Inf"):
            decode_checkpoint(_tamper_first_tensor(state, tensor), config)


def test_tensor_count_mismatch_is_refused(state: TrainState, config: StateConfig) -> None:
    data = bytearray(encode_checkpoint(state))
    struct.pack_into("<I", data, HEADER.size - 4, len(state.tensors) + 1)
    with pytest.raises(CheckpointError, match="tensors"):
        decode_checkpoint(bytes(data), config)


@pytest.mark.parametrize("error_feedback", [False, True])
def test_checkpoint_size_is_exact(error_feedback: bool) -> None:
    for name in ("adamw", "muon"):
        config = StateConfig(PRESETS["tiny"], InnerOptimSpec(name=name), error_feedback)
        assert checkpoint_size(config) == len(encode_checkpoint(init_state(config, 1)))
