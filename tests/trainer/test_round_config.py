"""``island_train_config``: the one builder of a round's config, and that callers use it;
``warm_start_config`` and the warm start's steps before round 0."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from hypertrain.protocol.manifest import (
    DataSpec,
    InnerOptimSpec,
    LayoutSpec,
    RoundSpec,
    RunManifest,
    WarmStartSpec,
)
from hypertrain.trainer.determinism import configure_determinism
from hypertrain.trainer.errors import SampleError
from hypertrain.trainer.model import init_params
from hypertrain.trainer.presets import PRESETS
from hypertrain.trainer.round_config import (
    RoundIndexError,
    WarmStartError,
    island_train_config,
    warm_start_config,
)
from hypertrain.trainer.start_state import reset_state
from hypertrain.trainer.warm_start import run_warm_start

SRC = Path(__file__).resolve().parents[2] / "src" / "hypertrain"
BUILDERS = {"trainer/segment.py", "trainer/round_config.py"}


def _manifest() -> RunManifest:
    return RunManifest(
        run_id="round-config",
        seed=1,
        model=PRESETS["tiny"],
        inner=InnerOptimSpec(warmup_steps=2, total_steps=40),
        round=RoundSpec(inner_steps=4, checkpoint_interval=2, layout=LayoutSpec()),
        data=DataSpec(
            dataset_root="0" * 64,
            descriptor_sha256="1" * 64,
            tokenizer_sha256="2" * 64,
            sample_count=100,
            seq_len=17,
        ),
        determinism=configure_determinism(1),
    )


def test_the_schedule_follows_the_round() -> None:
    manifest = _manifest()
    config = island_train_config(manifest, 3)
    assert config.round_index == 3
    assert [config.schedule_step(i) for i in range(4)] == [12, 13, 14, 15]
    assert island_train_config(manifest, 0).schedule_step(2) == 2


def test_layout_and_device_pass_through() -> None:
    layout = LayoutSpec(dp_ranks=2, micro_batch_size=3)
    config = island_train_config(_manifest(), 1, layout=layout, device="cpu")
    assert config.layout == layout and config.samples_per_step == 6
    assert island_train_config(_manifest(), 1).layout == _manifest().round.layout


def test_round_index_has_no_default() -> None:
    with pytest.raises(TypeError):
        island_train_config(_manifest())  # type: ignore[call-arg]


@pytest.mark.parametrize("bad", [-1, True, 1.0, "2", None])
def test_a_bad_round_index_is_refused(bad: object) -> None:
    with pytest.raises(RoundIndexError):
        island_train_config(_manifest(), bad)  # type: ignore[arg-type]


def test_round_index_error_is_a_value_error() -> None:
    assert issubclass(RoundIndexError, ValueError)


def test_no_caller_builds_a_train_config_around_the_builder() -> None:
    """Only the builder (and the class itself) may call ``TrainConfig.from_manifest`` or
    the constructor: every other caller goes through ``island_train_config``."""
    pattern = re.compile(r"TrainConfig(\.from_manifest)?\(")
    offenders = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if str(p.relative_to(SRC)) not in BUILDERS and pattern.search(p.read_text())
    ]
    assert offenders == []


def _warm(steps: int = 6, batch: int = 4) -> RunManifest:
    return _manifest().model_copy(
        update={"warm_start": WarmStartSpec(steps=steps, samples_per_step=batch)}
    )


def test_rounds_after_a_warm_start_continue_its_schedule() -> None:
    manifest = _warm()
    config = island_train_config(manifest, 3)
    assert [config.schedule_step(i) for i in range(4)] == [18, 19, 20, 21]
    assert config.round_start_step(0) == 6 == manifest.first_round_step
    # the start state of round r counts the warm start's steps as well
    params = init_params(manifest.model, manifest.seed)
    assert reset_state(config.state_config(), params, config.round_start_step(3)).step == 18


def test_a_warm_start_step_is_one_data_parallel_step_on_the_global_batch() -> None:
    manifest = _warm()
    config = warm_start_config(manifest, 5)
    assert (config.inner_steps, config.samples_per_step, config.schedule_step(0)) == (1, 4, 5)
    for bad in (-1, 6, True):
        with pytest.raises(WarmStartError):
            warm_start_config(manifest, bad)  # type: ignore[arg-type]
    with pytest.raises(WarmStartError, match="no warm start"):
        warm_start_config(_manifest(), 0)


def test_the_warm_start_takes_exactly_its_steps() -> None:
    manifest = _warm(steps=2, batch=2)
    seq = manifest.data.seq_len
    batch = [(i, np.full(seq, i % manifest.model.vocab_size, dtype=np.int64)) for i in range(2)]
    with pytest.raises(WarmStartError, match="2 steps, 1 batches"):
        run_warm_start(manifest, [batch])
    with pytest.raises(SampleError):
        run_warm_start(manifest, [batch, batch[:1]])
    assert run_warm_start(manifest, [batch, batch]).step == 2


def test_a_warm_start_is_refused_past_the_schedule_and_left_out_when_unset() -> None:
    with pytest.raises(ValueError, match=r"exceeds inner\.total_steps"):
        RunManifest.model_validate({**_manifest().model_dump(), "warm_start": {
            "steps": 41, "samples_per_step": 1}})  # fmt: skip
    assert "warm_start" not in _manifest().model_dump(mode="json")
    assert _warm().digest() != _manifest().digest()
