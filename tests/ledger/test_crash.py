"""Crash test: SIGKILL a process mid-sequence, many times; nothing is half-applied or doubled.

The child applies a seeded random op sequence from the start each time it runs, so ops
applied before a kill are repeated after it and must be no-ops. After every kill the
ledger must verify and conserve value; at the end its journal heads and weights answers
must equal those of a reference ledger that applied the same sequence without a crash.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hypertrain.ledger import Ledger
from tests.ledger.crash_child import run as run_child
from tests.ledger.ops import check_invariants

ROOT = Path(__file__).resolve().parents[2]
SEED, COUNT, KILLS = 20260101, 2000, 18


def _child(db: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "tests.ledger.crash_child", str(db), str(SEED), str(COUNT)]
    return subprocess.Popen(cmd, cwd=ROOT)


def _fingerprint(db: Path) -> tuple[list[str], list[bytes]]:
    with Ledger(db) as led:
        heads = [led.summary(r).head_hash for r in led.runs()]
        epochs = [r[0] for r in led._conn.execute("SELECT epoch FROM weights ORDER BY epoch")]
        answers = [led.weights_bytes(e) or b"" for e in epochs]
    return heads, answers


@pytest.mark.slow
def test_sigkill_at_random_moments(tmp_path: Path) -> None:
    db = tmp_path / "crash.sqlite3"
    rng = random.Random(7)
    kills = 0
    for _ in range(KILLS):
        proc = _child(db)
        time.sleep(rng.uniform(0.2, 0.5))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait(timeout=60)
        with Ledger(db) as led:
            report = led.verify()
            assert report.ok, report.render()
            check_invariants(led)
    assert kills >= KILLS - 2  # the sequence is long enough that nearly every kill lands
    finisher = _child(db)
    assert finisher.wait(timeout=120) == 0
    reference = tmp_path / "reference.sqlite3"
    run_child(reference, SEED, COUNT)
    assert _fingerprint(db) == _fingerprint(reference)
