"""``island_train_config``: the one builder of a round's config, and that callers use it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hypertrain.protocol.manifest import (
    DataSpec,
    InnerOptimSpec,
    LayoutSpec,
    RoundSpec,
    RunManifest,
)
from hypertrain.trainer.determinism import configure_determinism
from hypertrain.trainer.presets import PRESETS
from hypertrain.trainer.round_config import RoundIndexError, island_train_config

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
