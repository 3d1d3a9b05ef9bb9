"""The parity harness's quick grid runs and writes a result of the documented shape."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

CELL_KEYS = {
    "name", "kind", "islands", "inner_steps", "optimizer", "policy", "codec", "seeds",
    "final_loss", "final_loss_mean", "final_loss_sd", "curves", "bytes_sent", "ddp_bytes",
}  # fmt: skip
GAP_KEYS = {"gap_pct", "gap_pct_mean", "gap_pct_ci90", "equivalent", "non_inferior"}


def test_quick_grid_writes_the_documented_json(tmp_path: Path) -> None:
    out = tmp_path / "quick.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "parity.py"), "--quick", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=540, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["grid"] == "quick" and doc["margin_pct"] == 0.5
    assert {"model", "parameters", "tokenizer_sha256", "sparse"} <= set(doc["setup"])
    cells = doc["cells"]
    assert len(cells) == 3 and [c["kind"] for c in cells.values()].count("dp") == 1
    for cell in cells.values():
        assert set(cell) >= CELL_KEYS, cell.keys()
        assert len(cell["final_loss"]) == len(cell["seeds"]) >= 3
        if cell["kind"] == "diloco":
            assert set(cell) >= GAP_KEYS and len(cell["gap_pct_ci90"]) == 2
            assert cell["bytes_sent"] > 0 and cell["saved_vs_ddp_updates"] > 0
    assert "traffic" in doc["best"]  # the quick grid has no M = 8 cell, so no m8_parity
