"""A short long run: the real network for tens of rounds trains, and says by how much.

The network as ``hypertrain devnet`` runs it (every role its own process, the default
recipe's state policy, averaging and broadcast) on the tiny preset for 24 rounds: its
held-out loss must fall (the last five rounds' mean below the first five's, and the
five-round moving average never rising for more than five rounds in a row, the quality
target of the long-run benchmark), and the report must carry the data-parallel baseline
trained on the same tokens beside it.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROUNDS = 24


def _moving_average(values: list[float], window: int = 5) -> list[float]:
    return [sum(values[i - window : i]) / window for i in range(window, len(values) + 1)]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # tens of rounds of a whole network on a busy machine
def test_the_network_trains_over_tens_of_rounds(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    argv = [
        *("--rounds", str(ROUNDS), "--h", "4", "--j", "4", "--preset", "tiny"),
        *("--seq-len", "32", "--vocab-size", "512", "--port", "0", "--islands", "2"),
        *("--state-dir", str(tmp_path / "devnet"), "--cache-dir", str(tmp_path / "cache")),
        *("--exit-when-done", "--report", str(report), "--timeout-s", "1500"),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "hypertrain.cli", "devnet", *argv],
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads(report.read_text())
    losses = [r["heldout_loss"] for r in doc["rounds"]]
    assert len(losses) == ROUNDS and all(x is not None for x in losses)
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5, losses
    average = _moving_average(losses)
    rises = [b > a for a, b in itertools.pairwise(average)]
    streak = max((len(run) for run in "".join("x" if r else " " for r in rises).split()), default=0)
    assert streak <= 5, losses
    base = doc["baseline"]
    assert base["error"] is None and base["rounds"] == ROUNDS and base["gap_pct"] is not None
