from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hypertrain.trainer.determinism import (
    check_determinism,
    configure_determinism,
    current_record,
    record_differences,
)
from hypertrain.trainer.errors import DeterminismError


def test_configure_sets_switches_and_records_them() -> None:
    record = configure_determinism(1)
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.get_num_threads() == 1
    assert record.num_threads == 1 and record.dtype == "float32"
    assert record.torch_version == torch.__version__
    assert record.device_class.startswith("cpu:")
    for key in ("aten_cpu_capability", "mkl_cbwr", "onednn_max_cpu_isa"):
        assert key in record.settings
    assert record == current_record()
    check_determinism(record, current_record())


def test_a_different_record_is_refused() -> None:
    local = configure_determinism(1)
    other_threads = local.model_copy(update={"num_threads": 2})
    with pytest.raises(DeterminismError, match="num_threads"):
        check_determinism(local, other_threads)
    # "Another" capability is derived from the local one, so the test holds on any CPU.
    mine = local.settings["aten_cpu_capability"]
    theirs = f"not-{mine}"
    other_isa = local.model_copy(
        update={"settings": {**local.settings, "aten_cpu_capability": theirs}}
    )
    assert record_differences(local, other_isa) == [
        f"settings.aten_cpu_capability: local {mine!r} != manifest {theirs!r}"
    ]
    with pytest.raises(DeterminismError, match="refusing to replay"):
        check_determinism(local, other_isa.model_copy(update={"torch_version": "1.0"}))


def test_bad_requests_are_refused() -> None:
    with pytest.raises(DeterminismError, match="num_threads"):
        configure_determinism(0)
    with pytest.raises(DeterminismError, match="bfloat16"):
        configure_determinism(1, "cpu", "bfloat16")


def test_the_cpu_vendor_names_arm_implementers_apart(tmp_path: Path) -> None:
    """Every record names the vendor (MKL's paths differ between them); Arm hosts have no
    ``vendor_id``, so their implementer code stands in, and two Arm vendors differ."""
    from hypertrain.trainer.determinism import cpu_vendor

    intel = tmp_path / "intel"
    intel.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t: avx2\n")
    arm, ampere = tmp_path / "arm", tmp_path / "ampere"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n")
    ampere.write_text("processor\t: 0\nCPU implementer\t: 0xc0\nCPU part\t: 0xac3\n")
    assert cpu_vendor(str(intel)) == "GenuineIntel"
    assert cpu_vendor(str(arm)) == "arm:0x41" != cpu_vendor(str(ampere)) == "arm:0xc0"
    assert cpu_vendor(str(tmp_path / "missing"))  # the platform's name, never empty
