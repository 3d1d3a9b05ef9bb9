"""The admission self-check workload: deterministic, device-consistent, CLI report shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hypertrain.miner.admission import SelfcheckConfig, main, selfcheck, workload_hash
from hypertrain.protocol.messages import DeviceReport

SMALL = SelfcheckConfig(dim=64, steps=3)


def test_workload_hash_is_deterministic_and_config_bound() -> None:
    cpu = torch.device("cpu")
    first = workload_hash(cpu, SMALL)
    assert first == workload_hash(cpu, SMALL)
    assert first != workload_hash(cpu, SelfcheckConfig(dim=64, steps=4))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert workload_hash(cpu, SMALL) == first  # the workload pins one thread itself
    finally:
        torch.set_num_threads(threads)
    assert torch.get_num_threads() == threads


def test_report_claims_memory_per_device() -> None:
    reports = selfcheck([torch.device("cpu"), torch.device("cpu")], SMALL, claim_bytes=2 << 20)
    assert [r.index for r in reports] == [0, 1]
    assert len({r.workload_hash for r in reports}) == 1
    assert all(r.memory_bytes == 2 << 20 and r.device_class.startswith("cpu:") for r in reports)


def test_cli_writes_a_join_ready_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.json"
    assert main(["selfcheck", "--out", str(out), "--claim-mib", "1"]) == 0
    doc = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out) == doc
    for device in doc["devices"]:
        DeviceReport.model_validate(device)
