"""The service's torch-free checkpoint size agrees with the trainer's exact one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hypertrain.challenge.dashboard.document import param_count
from hypertrain.challenge.dashboard.traffic import carried_bytes, state_bytes
from hypertrain.protocol.manifest import CompressionSpec, InnerOptimSpec
from hypertrain.trainer.carried import carried_size
from hypertrain.trainer.checkpoint import checkpoint_size
from hypertrain.trainer.presets import PRESETS
from hypertrain.trainer.state import StateConfig


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
@pytest.mark.parametrize("error_feedback", [False, True])
@pytest.mark.parametrize("preset", ["tiny", "tiny-moe", "proxy"])
def test_state_bytes_are_the_checkpoint_less_headers(
    optimizer: str, error_feedback: bool, preset: str
) -> None:
    spec, inner = PRESETS[preset], InnerOptimSpec(name=optimizer)  # type: ignore[arg-type]
    comp = CompressionSpec(error_feedback=error_feedback)
    manifest = SimpleNamespace(model=spec, inner=inner, compression=comp)
    exact = checkpoint_size(StateConfig(spec, inner, error_feedback))
    approx = state_bytes(manifest, param_count(spec))  # type: ignore[arg-type]
    assert approx < exact <= approx + 4096 + approx // 100


@pytest.mark.parametrize("carried_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
@pytest.mark.parametrize("error_feedback", [False, True])
def test_carried_bytes_are_the_carried_state_less_headers(
    carried_dtype: str, optimizer: str, error_feedback: bool
) -> None:
    """The service counts a carried state in the run's carried width, as the trainer
    writes it; a checkpoint stays float32 whatever the width."""
    spec = PRESETS["proxy"]
    inner = InnerOptimSpec(name=optimizer, state_policy="carry", carried_dtype=carried_dtype)  # type: ignore[arg-type]
    comp = CompressionSpec(error_feedback=error_feedback)
    manifest = SimpleNamespace(model=spec, inner=inner, compression=comp)
    config = StateConfig(spec, inner, error_feedback)
    exact = carried_size(config)
    approx = carried_bytes(manifest, param_count(spec))  # type: ignore[arg-type]
    assert approx < exact <= approx + 4096 + approx // 100
    float32 = StateConfig(spec, InnerOptimSpec(name=optimizer), error_feedback)  # type: ignore[arg-type]
    assert state_bytes(manifest, param_count(spec)) < checkpoint_size(float32)  # type: ignore[arg-type]
    assert checkpoint_size(config) == checkpoint_size(float32)
