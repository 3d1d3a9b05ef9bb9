from __future__ import annotations

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
