"""Sizing the admission workload: the arithmetic of the per-hotkey bound, its refusals,
and the command an operator runs (docs/mechanism.md, "What one device can answer for")."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from hypertrain.cli import main
from hypertrain.ops.admission_size import (
    MAX_WORKLOAD_STEPS,
    DeviceCost,
    SizingError,
    hotkeys_per_device,
    measure,
    size,
)
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.manifest_file import manifest_document

MIB = 1 << 20
COST = DeviceCost(device_class="cpu:test", s_per_step=0.001, table_s_per_gib=0.0, parallel=1.0)


@pytest.mark.parametrize(
    ("fill", "steps", "hotkeys"),
    [(0.6, 3600, 1), (0.51, 3060, 1), (0.25, 1500, 4), (0.1, 600, 10)],
)
def test_the_workload_fills_its_share_and_bounds_answers_one_after_another(
    fill: float, steps: int, hotkeys: int
) -> None:
    """Above half the window, one device answers for one hotkey per window."""
    sizing = size(COST, 6.0, fill)
    assert sizing.workload_steps == steps
    assert sizing.workload_s >= fill * 6.0 - 1e-9
    assert sizing.hotkeys_per_device == hotkeys == sizing.hotkeys_bound


def test_the_claims_table_is_part_of_every_answer() -> None:
    """A 1 GiB claim at 2 s per GiB: 1.2 s of workload plus 2 s of table in a 6 s window."""
    cost = DeviceCost(device_class="c", s_per_step=0.001, table_s_per_gib=2.0, parallel=1.0)
    sizing = size(cost, 6.0, 0.2, 1 << 30)
    assert sizing.workload_steps == 1200
    assert math.isclose(sizing.answer_s, 3.2) and sizing.hotkeys_per_device == 1


def test_answers_side_by_side_are_bounded_by_compute_and_by_memory() -> None:
    """A device running 8 chains at once answers for 8 hotkeys per window unless its
    memory holds fewer of the claimed tables."""
    wide = DeviceCost(device_class="gpu", s_per_step=0.001, table_s_per_gib=0.0, parallel=8.0)
    roomy = size(wide, 6.0, 0.6, 256 * MIB, device_memory_bytes=64 << 30)
    assert (roomy.hotkeys_by_compute, roomy.hotkeys_by_memory, roomy.hotkeys_bound) == (8, 256, 8)
    tight = size(wide, 6.0, 0.6, 256 * MIB, device_memory_bytes=1 << 30)
    assert (tight.hotkeys_by_memory, tight.hotkeys_bound) == (4, 4)


@pytest.mark.parametrize(
    ("window_s", "fill", "claim", "words"),
    [
        (6.0, 0.0, MIB, "strictly between 0 and 1"),
        (6.0, 1.0, MIB, "strictly between 0 and 1"),
        (0.0, 0.5, MIB, "must be positive"),
        (6.0, 0.5, MIB - 1, "at least"),
        (2000.0, 0.9, MIB, "above the manifest's bound"),
    ],
)
def test_a_sizing_that_cannot_be_met_is_refused(
    window_s: float, fill: float, claim: int, words: str
) -> None:
    with pytest.raises(SizingError, match=words):
        size(COST, window_s, fill, claim)


def test_an_answer_longer_than_its_window_is_refused() -> None:
    """An honest island of the class could not answer: the sizing is refused, not printed."""
    slow_table = DeviceCost(device_class="c", s_per_step=0.001, table_s_per_gib=10.0, parallel=1)
    with pytest.raises(SizingError, match=r"more than the 6\.0 s window"):
        size(slow_table, 6.0, 0.6, 1 << 30)


def test_hotkeys_per_device_refuses_empty_windows() -> None:
    assert hotkeys_per_device(6.0, 7.0) == 0
    with pytest.raises(SizingError):
        hotkeys_per_device(6.0, 0.0)


def test_the_largest_sizing_stays_inside_the_manifests_bound() -> None:
    sizing = size(COST, MAX_WORKLOAD_STEPS * COST.s_per_step / 0.5, 0.5)
    assert sizing.workload_steps == MAX_WORKLOAD_STEPS


def test_measure_times_this_device() -> None:
    """Only the shape: the figures are this machine's."""
    cost = measure(torch.device("cpu"), repeats=1)
    assert cost.device_class.startswith("cpu:")
    assert cost.s_per_step > 0 and cost.table_s_per_gib > 0 and cost.parallel >= 1.0
    with pytest.raises(SizingError):
        measure(torch.device("cpu"), repeats=0)


def test_size_admission_prints_json_and_refuses_bad_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "size-admission", "--window-rounds", "2", "--period-s", "3"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["window_s"] == 6.0 and printed["workload_steps"] >= 1
    assert printed["hotkeys_per_device"] == 1  # the default fill is above half the window
    assert main(["run", "size-admission", "--fill", "1.5"]) == 1
    assert "strictly between 0 and 1" in capsys.readouterr().err
    assert main(["run", "size-admission", "--window-rounds", "0"]) == 1
    assert "--window-rounds" in capsys.readouterr().err


def test_run_init_writes_the_sized_admission_workload(
    small_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.json"
    args = ["run", "init", "--run-id", "r1", "--preset", "tiny", "--out", str(out)]
    sized = ["--admission-workload-steps", "7000", "--admission-window-rounds", "3"]
    assert main([*args, "--dataset-dir", str(small_dataset), *sized]) == 0
    capsys.readouterr()
    manifest = RunManifest.model_validate(manifest_document(out.read_bytes()))
    assert (manifest.admission.workload_steps, manifest.admission.answer_window_rounds) == (
        7000,
        3,
    )
