"""``run init`` writes an admission workload sized for the run's device class, or the
local 8 steps only when asked for a local run (docs/mechanism.md, "What one device can
answer for")."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hypertrain.cli import main
from hypertrain.ops.admission_size import DeviceCost, size
from hypertrain.ops.manifest import (
    LOCAL_WORKLOAD_STEPS,
    SIZING_FILL,
    AdmissionSizingError,
    RunOptions,
    admission_workload_steps,
)
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.manifest_file import manifest_document
from hypertrain.trainer.selfcheck import device_class

CPU = torch.device("cpu")


def _cost(_: torch.device) -> DeviceCost:
    """A fixed measurement (the real one takes tens of seconds on a busy machine)."""
    return DeviceCost(device_class(CPU), s_per_step=5e-4, table_s_per_gib=54.0, parallel=1.4)


def _opts(**kw: object) -> RunOptions:
    return RunOptions(run_id="r", dataset_dir=Path(), **kw)  # type: ignore[arg-type]


def test_run_init_refuses_the_local_workload_for_a_run_that_is_not_local(
    small_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.json"
    args = ["run", "init", "--run-id", "r1", "--preset", "tiny", "--dataset-dir",
            str(small_dataset), "--h", "4", "--j", "2", "--out", str(out)]  # fmt: skip
    assert main(args) == 1 and not out.exists()
    err = capsys.readouterr().err
    for fix in ("--admission-device-class", "--admission-workload-steps", "--local"):
        assert fix in err, err
    assert main([*args, "--admission-workload-steps", str(LOCAL_WORKLOAD_STEPS)]) == 1
    assert "local run only" in capsys.readouterr().err
    assert main([*args, "--local"]) == 0
    manifest = RunManifest.model_validate(manifest_document(out.read_bytes()))
    assert manifest.admission.workload_steps == LOCAL_WORKLOAD_STEPS


def test_a_named_device_class_is_sized_as_size_admission_sizes_it() -> None:
    opts = _opts(admission_device_class=device_class(CPU), admission_window_rounds=2)
    steps = admission_workload_steps(opts, CPU, measure=_cost)
    sizing = size(_cost(CPU), 2 * opts.beacon_period_s, SIZING_FILL)
    assert steps == sizing.workload_steps > LOCAL_WORKLOAD_STEPS
    # the bound docs/mechanism.md states holds at this size: one answer per window
    assert sizing.hotkeys_per_device == 1


def test_a_class_this_machine_is_not_or_two_sizings_are_refused() -> None:
    other = _opts(admission_device_class="cuda:NVIDIA-H100")
    with pytest.raises(AdmissionSizingError, match="cannot be measured on this machine"):
        admission_workload_steps(other, CPU, measure=_cost)
    both = _opts(admission_device_class=device_class(CPU), admission_workload_steps=7000)
    with pytest.raises(AdmissionSizingError, match="not both"):
        admission_workload_steps(both, CPU, measure=_cost)
    assert admission_workload_steps(_opts(admission_workload_steps=7000), CPU) == 7000
    assert admission_workload_steps(_opts(local=True), CPU) == LOCAL_WORKLOAD_STEPS
