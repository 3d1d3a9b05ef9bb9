from __future__ import annotations

import json
from pathlib import Path

import pytest

from hypertrain.cli import main
from hypertrain.trainer.checkpoint import save_checkpoint
from hypertrain.trainer.presets import PRESETS, param_count
from hypertrain.trainer.state import StateConfig, init_state
from tests.trainer.conftest import make_config


def test_info_prints_exact_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trainer", "info", "--preset", "50m"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["parameters"] == param_count(PRESETS["50m"]) == 52_871_680
    assert doc["train_flops_per_token"] == 3 * doc["forward_flops_per_token"]
    assert main(["trainer", "info", "--preset", "nope"]) == 1


def test_determinism_prints_record(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trainer", "determinism", "--threads", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["num_threads"] == 1


def test_hash_and_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = make_config()
    state = init_state(StateConfig(PRESETS["tiny"], cfg.inner), 0)
    digest = save_checkpoint(state, tmp_path / "ckpt")
    assert main(["trainer", "hash", str(tmp_path / "ckpt"), "--preset", "tiny"]) == 0
    assert capsys.readouterr().out.startswith(digest.hex())
    assert (
        main(
            ["trainer", "export", str(tmp_path / "ckpt"), str(tmp_path / "hf"), "--preset", "tiny"]
        )
        == 0
    )
    assert (tmp_path / "hf" / "model.safetensors").exists()
    assert main(["trainer", "hash", str(tmp_path / "ckpt"), "--preset", "tiny-moe"]) == 1
    assert "another model" in capsys.readouterr().err
