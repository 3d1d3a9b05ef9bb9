"""The carried state (``trainer.carried``): what a ``carry`` round's start needs of the
island beyond public records, its byte format, its refusals, and the start state it
gives, byte for byte the one the whole final state gave before it existed."""

from __future__ import annotations

import struct

import pytest
import torch
from pydantic import ValidationError

from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.index import CheckpointIndex
from hypertrain.protocol.canonical import canonical_bytes, parse_json
from hypertrain.protocol.manifest import CompressionSpec, InnerOptimSpec
from hypertrain.trainer.carried import (
    CARRIED_MAGIC,
    CarriedState,
    carried_layout,
    carried_size,
    decode_carried,
    encode_carried,
    slot_dtype,
)
from hypertrain.trainer.checkpoint import checkpoint_size
from hypertrain.trainer.errors import CheckpointError
from hypertrain.trainer.start_state import carried_of, carry_state
from hypertrain.trainer.state import HEADER, StateConfig, TrainState, init_state
from hypertrain.trainer.update import build_update, next_round_state
from tests.trainer.conftest import make_config

EF = CompressionSpec(bits=4, error_feedback=True)


def _final(config: StateConfig, seed: int = 1) -> tuple[TrainState, dict[str, torch.Tensor]]:
    """A state with nonzero moments and residual, and the start parameters of its round."""
    g = torch.Generator().manual_seed(seed)
    state = init_state(config, seed)
    tensors = {k: v + 0.01 * torch.randn(v.shape, generator=g) for k, v in state.tensors.items()}
    final = TrainState(42, tensors, state.config_digest)
    start = {k: v + 0.02 * torch.randn(v.shape, generator=g) for k, v in final.params().items()}
    return final, start


@pytest.mark.parametrize("compression", [CompressionSpec(bits=4), EF], ids=["plain", "ef"])
def test_the_start_state_is_the_one_the_whole_final_state_gave(
    compression: CompressionSpec,
) -> None:
    config = StateConfig(make_config().model, make_config().inner, compression.error_feedback)
    final, start = _final(config)
    merged = {k: v * 0.5 for k, v in start.items()}
    carried = carried_of(final, start, compression)
    assert [s.name for s in carried_layout(config)] == list(carried.tensors)
    assert not set(carried.tensors) & set(final.params())  # no parameter travels
    residual = build_update(start, final, compression).residual
    before = next_round_state(final, merged, residual)  # the former derivation
    after = carry_state(decode_carried(encode_carried(carried), config), merged, config)
    assert after.state_hash() == before.state_hash()
    assert list(after.tensors) == [s.name for s in config.layout()]


def test_round_trip_and_size() -> None:
    config = make_config().state_config()
    final, start = _final(config)
    carried = carried_of(final, start, CompressionSpec())
    data = encode_carried(carried)
    assert len(data) == carried_size(config)
    assert carried_size(config) < checkpoint_size(config) * 0.7  # AdamW: two thirds
    back = decode_carried(data, config)
    assert back.step == 42 and encode_carried(back) == data


def _header(data: bytes, **fields: object) -> bytes:
    magic, version, digest, step, count = HEADER.unpack_from(data)
    values = {"magic": magic, "version": version, "digest": digest, "step": step,
              "count": count, **fields}  # fmt: skip
    return HEADER.pack(*values.values()) + data[HEADER.size :]


def test_hostile_bytes_are_typed_refusals() -> None:
    config = make_config().state_config()
    final, start = _final(config)
    data = encode_carried(carried_of(final, start, CompressionSpec()))
    nan = carried_of(final, start, CompressionSpec())
    first = next(iter(nan.tensors))
    nan.tensors[first] = torch.full_like(nan.tensors[first], float("nan"))
    other = StateConfig(make_config().model, make_config().inner, True)  # with a residual
    cases = [
        ("truncated", data[:10]),
        ("truncated", data[:-1]),
        ("trailing", data + b"\x00"),
        ("not a version", _header(data, magic=b"HTSTATE1")),
        ("not a version", _header(data, version=2)),
        ("another model", _header(data, digest=b"\x01" * 32)),
        ("tensors, expected", _header(data, count=1)),
        ("NaN", encode_carried(nan)),
    ]
    for match, bad in cases:
        with pytest.raises(CheckpointError, match=match):
            decode_carried(bad, config)
    with pytest.raises(CheckpointError, match="another model"):
        decode_carried(data, other)
    renamed = data.replace(b"optim.exp_avg.", b"optim.exp_avx.", 1)
    with pytest.raises(CheckpointError, match="expected tensor"):
        decode_carried(renamed, config)
    assert data.startswith(CARRIED_MAGIC) and struct.unpack_from("<I", data, 8) == (1,)


def test_a_carried_state_of_another_config_or_layout_is_refused() -> None:
    config = make_config().state_config()
    final, start = _final(config)
    carried = carried_of(final, start, CompressionSpec())
    with pytest.raises(ValueError, match="another model"):
        carry_state(CarriedState(1, carried.tensors, b"\x00" * 32), start, config)
    short = dict(carried.tensors)
    short.pop(next(iter(short)))
    with pytest.raises(ValueError, match="has no tensor"):
        carry_state(CarriedState(1, short, carried.config_digest), start, config)
    with pytest.raises(ValueError, match="has no tensor"):
        carry_state(carried, {}, config)  # the merged model is missing


def test_the_index_names_the_carried_state_strictly() -> None:
    h = "ab" * 32
    plain = CheckpointIndex(0, (h,), (h,))
    named = CheckpointIndex(0, (h,), (h,), "cd" * 32)
    assert b"carried" not in plain.to_bytes()
    for index in (plain, named):
        assert CheckpointIndex.from_bytes(index.to_bytes()) == index
    doc = parse_json(named.to_bytes())
    for bad in (None, "CD" * 32, "cd", 7, ["cd" * 32]):
        with pytest.raises(VerificationError, match="carried"):
            CheckpointIndex.from_bytes(canonical_bytes({**doc, "carried": bad}))
    with pytest.raises(VerificationError, match="wrong fields"):
        CheckpointIndex.from_bytes(canonical_bytes({**doc, "carry": "cd" * 32}))


def _bf16_config(error_feedback: bool = False) -> StateConfig:
    config = make_config(state_policy="carry", carried_dtype="bfloat16")
    return StateConfig(config.model, config.inner, error_feedback)


def test_bfloat16_slots_are_rounded_once_and_widened_exactly() -> None:
    """``carried_dtype: bfloat16``: the slots travel rounded to nearest-even (a third of a
    checkpoint with AdamW instead of two thirds), the residual stays float32, and the next
    start state holds exactly the rounded values."""
    config = _bf16_config(error_feedback=True)
    final, start = _final(config)
    carried = carried_of(final, start, EF, slots=slot_dtype(config.inner))
    data = encode_carried(carried)
    assert len(data) == carried_size(config)
    plain = _bf16_config()  # AdamW without a residual: a third of a checkpoint
    assert carried_size(plain) < checkpoint_size(plain) * 0.4
    assert carried_size(plain) < 0.6 * carried_size(make_config().state_config())
    back = decode_carried(data, config)
    assert encode_carried(back) == data
    merged = {k: v * 0.5 for k, v in start.items()}
    state = carry_state(back, merged, config)
    for name, value in final.tensors.items():
        if name.startswith("optim."):
            assert back.tensors[name].dtype == torch.bfloat16
            rounded = value.to(torch.bfloat16).float()
            assert torch.equal(state.tensors[name], rounded)
            assert not torch.equal(rounded, value)  # the rounding is real
        elif name.startswith("residual."):
            assert back.tensors[name].dtype == torch.float32
            assert torch.equal(state.tensors[name], back.tensors[name])


def test_a_carried_state_of_the_other_width_is_refused() -> None:
    """A float32 carried state in a bfloat16 run, and the reverse, are typed refusals."""
    wide = make_config().state_config()
    narrow = _bf16_config()
    final, start = _final(wide)
    as_float32 = encode_carried(carried_of(final, start, CompressionSpec()))
    as_bf16 = encode_carried(carried_of(final, start, CompressionSpec(), slots=torch.bfloat16))
    for data, config in ((as_float32, narrow), (as_bf16, wide)):
        with pytest.raises(CheckpointError, match="dtype code"):
            decode_carried(data, config)


def test_the_carried_width_is_a_manifest_choice_of_carry_runs() -> None:
    """float32 is absent from the canonical bytes (older manifests keep their hash);
    bfloat16 is written, and refused under ``reset``, which carries nothing."""
    plain = InnerOptimSpec()
    assert b"carried_dtype" not in canonical_bytes(plain.model_dump(mode="json"))
    narrow = InnerOptimSpec(state_policy="carry", carried_dtype="bfloat16")
    doc = narrow.model_dump(mode="json")
    assert doc["carried_dtype"] == "bfloat16" and InnerOptimSpec.model_validate(doc) == narrow
    assert slot_dtype(narrow) == torch.bfloat16 and slot_dtype(plain) == torch.float32
    with pytest.raises(ValidationError, match="needs state_policy carry"):
        InnerOptimSpec(carried_dtype="bfloat16")
    with pytest.raises(ValidationError):
        InnerOptimSpec(state_policy="carry", carried_dtype="float16")


def test_a_slot_beyond_the_narrow_range_is_an_error_at_the_source() -> None:
    """A finite float32 moment that bfloat16 rounds to Inf never becomes a carried state
    no reader accepts: ``carried_of`` refuses it."""
    config = _bf16_config()
    final, start = _final(config)
    name = next(n for n in final.tensors if n.startswith("optim."))
    final.tensors[name][0] = 3.40e38  # finite in float32, Inf in bfloat16
    assert bool(torch.isfinite(final.tensors[name]).all())
    with pytest.raises(ValueError, match=r"not finite in torch\.bfloat16"):
        carried_of(final, start, CompressionSpec(), slots=torch.bfloat16)
    carried_of(final, start, CompressionSpec())  # float32 slots hold it
