"""Outer Nesterov step against hand computation; outer-state blob round trip; exact norms."""

from __future__ import annotations

import math

import pytest
import torch

from hypertrain.aggregator.errors import AggregatorError, UpdateFormatError
from hypertrain.aggregator.norms import update_norm
from hypertrain.aggregator.outer import (
    decode_outer_state,
    encode_outer_state,
    nesterov_step,
    zero_momentum,
)
from hypertrain.aggregator.screen import median, screen, token_weights
from hypertrain.protocol.manifest import OuterOptimSpec
from hypertrain.trainer.codec import decode_int8, encode_int8
from hypertrain.trainer.model import param_shapes
from tests.aggregator.helpers import delta, manifest


def test_nesterov_matches_hand_computation_over_two_steps() -> None:
    outer = OuterOptimSpec(lr=0.5, momentum=0.5)
    theta, m = torch.tensor([1.0, 2.0]), torch.zeros(2)
    theta, m = nesterov_step(theta, torch.tensor([0.5, -1.0]), m, outer)
    # m1 = d1; theta1 = theta0 - lr * (d1 + mu * m1) = [1 - 0.375, 2 + 0.75]
    assert m.tolist() == [0.5, -1.0] and theta.tolist() == [0.625, 2.75]
    theta, m = nesterov_step(theta, torch.tensor([0.25, 0.0]), m, outer)
    # m2 = 0.5 * m1 + d2 = [0.5, -0.5]; theta2 = theta1 - 0.5 * (d2 + 0.5 * m2)
    assert m.tolist() == [0.5, -0.5] and theta.tolist() == [0.625 - 0.25, 2.75 + 0.125]


def test_plain_momentum_and_inputs_untouched() -> None:
    outer = OuterOptimSpec(lr=1.0, momentum=0.5, nesterov=False)
    theta, d, m = torch.tensor([1.0]), torch.tensor([0.5]), torch.tensor([1.0])
    new_theta, new_m = nesterov_step(theta, d, m, outer)
    assert new_m.tolist() == [1.0] and new_theta.tolist() == [0.0]
    assert theta.tolist() == [1.0] and m.tolist() == [1.0]


def test_outer_state_round_trip_and_refusals() -> None:
    spec = manifest().model
    mom = {n: t * 0 + i for i, (n, t) in enumerate(zero_momentum(spec).items())}
    blob = encode_outer_state(mom, spec, 3)
    assert blob == encode_outer_state(mom, spec, 3)
    back, round_ = decode_outer_state(blob, spec)
    assert round_ == 3 and all(torch.equal(back[n], mom[n]) for n in mom)
    other = spec.model_copy(update={"d_model": 64, "num_heads": 4})
    with pytest.raises(AggregatorError, match="another model"):
        decode_outer_state(blob, other)
    with pytest.raises(AggregatorError, match="safetensors"):
        decode_outer_state(b"\x00" * 16, spec)


def test_exact_norm_matches_float64_and_refuses_wrong_shapes() -> None:
    m = manifest()
    data = encode_int8(delta(m, 3), 64)
    decoded = decode_int8(data)
    ref = math.sqrt(sum(float(t.double().pow(2).sum()) for t in decoded.values()))
    assert update_norm(data, param_shapes(m.model)) == pytest.approx(ref, rel=1e-6)
    with pytest.raises(UpdateFormatError) as err:
        update_norm(data, param_shapes(m.model)[:-1])
    assert err.value.reason == "wrong_shape"


def test_screen_median_and_weights() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0 and median([1.0, 4.0]) == 2.5 and median([]) == 0.0
    norms = {"a": 1.0, "b": 1.2, "c": 30.0}
    result = screen(norms, OuterOptimSpec(reject_norm_factor=10.0), proven=list(norms))
    assert result.median == 1.2 and set(result.rejected) == {"c"}
    assert result.clip == {"a": 1.0, "b": 1.0}
    assert token_weights({"a": 1, "b": 3}) == {"a": 0.25, "b": 0.75}
    assert token_weights({"a": 0}) == {"a": 0.0}
