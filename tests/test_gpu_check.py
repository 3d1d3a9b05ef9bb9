"""scripts/gpu-check.sh runs end to end on a CPU with --dry-run and reports bitwise replay."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_check_dry_run_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "gpu-check.json"
    done = subprocess.run(
        [str(ROOT / "scripts" / "gpu-check.sh"), str(out), "--dry-run", "--steps", "2"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["ok"] is True
    assert doc["float32"]["two_runs_equal"] and doc["float32"]["two_processes_equal"]
    assert doc["island"]["equal"] is True
    assert doc["float32"]["deterministic_vs_nondeterministic_throughput"] > 0
