"""Error feedback's decay (``compression.error_feedback_decay``): SparseLoCo's accumulator."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from pydantic import ValidationError

from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.manifest import CompressionSpec, SparseSpec
from hypertrain.trainer.segment import run_round
from hypertrain.trainer.state import init_state
from hypertrain.trainer.update import (
    build_update,
    decode_update,
    encode_update,
    next_round_state,
    pseudo_gradient,
)
from tests.trainer.conftest import make_config, make_samples

SPARSE = SparseSpec(chunk_size=64, topk_per_chunk=4, value_bits=2)


def test_no_decay_keeps_the_canonical_bytes_of_earlier_manifests() -> None:
    plain = CompressionSpec(error_feedback=True, sparse=SPARSE)
    same = CompressionSpec(error_feedback=True, sparse=SPARSE, error_feedback_decay=1.0)
    assert canonical_bytes(same.model_dump(mode="json")) == canonical_bytes(
        plain.model_dump(mode="json")
    )
    decayed = CompressionSpec(error_feedback=True, sparse=SPARSE, error_feedback_decay=0.95)
    assert decayed.model_dump(mode="json")["error_feedback_decay"] == 0.95


@pytest.mark.parametrize("decay", [0.0, -0.5, 1.5, float("nan"), float("inf")])
def test_a_decay_outside_zero_to_one_is_refused(decay: float) -> None:
    with pytest.raises(ValidationError, match="error_feedback_decay"):
        CompressionSpec(error_feedback=True, error_feedback_decay=decay)


def test_a_decay_without_error_feedback_is_refused() -> None:
    with pytest.raises(ValidationError, match="needs error_feedback"):
        CompressionSpec(error_feedback=False, error_feedback_decay=0.9)


@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "int4"])
def test_the_next_round_encodes_its_delta_plus_the_decayed_residual(sparse: bool) -> None:
    """Round 2's update is exactly ``encode(delta + decay * residual)`` (one float32 multiply,
    then the add), and differs from the undecayed accumulator's."""
    decayed = (
        CompressionSpec(error_feedback=True, sparse=SPARSE, error_feedback_decay=0.5)
        if sparse
        else CompressionSpec(block_size=64, error_feedback=True, bits=4, error_feedback_decay=0.5)
    )
    cfg = replace(make_config(steps=2, interval=1), compression=decayed)
    start = init_state(cfg.state_config(), 0)
    end = run_round(start, cfg, make_samples(8)).final
    first = build_update(start.params(), end, decayed)
    assert first.residual is not None
    merged = {k: start.params()[k] - v for k, v in decode_update(first.data, decayed).items()}
    nxt = next_round_state(end, merged, first.residual)
    second_end = run_round(nxt, cfg, make_samples(8, seed=1)).final
    second = build_update(nxt.params(), second_end, decayed)

    delta = pseudo_gradient(nxt.params(), second_end.params())
    target = {k: delta[k] + torch.mul(first.residual[k], 0.5) for k in delta}
    assert second.data == encode_update(target, decayed)
    undecayed = replace_decay(decayed, 1.0)
    assert second.data != build_update(nxt.params(), second_end, undecayed).data
    assert second.residual is not None
    for k, r in second.residual.items():  # what is unsent stays in the accumulator
        assert torch.equal(r, target[k] - decode_update(second.data, decayed)[k])


def replace_decay(spec: CompressionSpec, decay: float) -> CompressionSpec:
    return spec.model_copy(update={"error_feedback_decay": decay})
