"""The join layout: one rank per device, micro-batches from miner.toml or the flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypertrain.miner.cli import build_parser
from hypertrain.miner.config import MinerConfig, config_from_args, load_config
from hypertrain.miner.errors import ConfigError
from hypertrain.miner.joining import join_layout
from hypertrain.protocol.manifest import manifest_from_json
from tests.challenge.helpers import manifest_doc

MANIFEST = manifest_from_json(manifest_doc())  # limits: 2 ranks, 4 micro-batches, size 5


def test_default_is_the_run_layout_with_one_rank_per_device() -> None:
    layout = join_layout(MANIFEST, MinerConfig(), devices=2)
    assert (layout.dp_ranks, layout.micro_batches, layout.micro_batch_size) == (2, 1, 5)


def test_micro_batches_from_toml_and_flag(tmp_path: Path) -> None:
    toml = tmp_path / "miner.toml"
    toml.write_text("[node]\nmicro_batches = 3\n")
    assert join_layout(MANIFEST, load_config(toml), 1).micro_batches == 3
    args = build_parser().parse_args(["join", "--config", str(toml), "--micro-batches", "4"])
    assert join_layout(MANIFEST, config_from_args(args), 1).micro_batches == 4


def test_layout_over_the_limits_is_refused_before_joining() -> None:
    with pytest.raises(ConfigError, match="5 micro-batches exceed the limit of 4"):
        join_layout(MANIFEST, MinerConfig(micro_batches=5), 1)
    with pytest.raises(ConfigError, match="3 ranks exceed"):
        join_layout(MANIFEST, MinerConfig(), 3)
    with pytest.raises(ConfigError, match="micro_batches: Input should be a valid integer"):
        load_config(None, {"micro_batches": "two"})
