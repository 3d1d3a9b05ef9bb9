"""The data-parallel reference: a bf16 ring all-reduce every step."""

from __future__ import annotations

import pytest

from hypertrain.protocol.traffic import ddp_bytes_per_device, ddp_bytes_total, honest_ratio


def test_ring_cost_is_2_n_minus_1_over_n_model_bytes_per_step() -> None:
    # 8 devices, 1000 bf16 gradients (2000 bytes), 10 steps: 2 * 7/8 * 2000 * 10 per device
    assert ddp_bytes_per_device(1000, 8, 10) == 35_000
    assert ddp_bytes_total(1000, 8, 10) == 280_000
    assert ddp_bytes_per_device(1000, 1, 10) == 0  # one device talks to nobody


def test_ratio_and_bad_inputs() -> None:
    assert honest_ratio(1000, {"updates": 10, "checkpoints": 90}) == 10.0
    assert honest_ratio(1000, {}) is None
    with pytest.raises(ValueError, match="bad traffic"):
        ddp_bytes_per_device(10, 0, 1)
