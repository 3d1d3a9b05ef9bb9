"""Crash test: SIGKILL a process mid-sequence, many times; nothing is half-applied or doubled.

Each kill is aimed at a chosen op position: the child reports each op index as it starts
it, and the parent sends SIGKILL once the child reports the chosen index, while the op is
in flight. No timing is involved, so the number of kills that land does not depend on the
machine's speed or load; a kill that misses (the child finished first) is aimed again.

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
from pathlib import Path

import pytest

from hypertrain.ledger import Ledger
from tests.ledger.crash_child import run as run_child
from tests.ledger.ops import check_invariants

ROOT = Path(__file__).resolve().parents[2]
SEED, COUNT, KILLS = 20260101, 2000, 18


def _child(db: Path, *, progress: bool = False) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "tests.ledger.crash_child", str(db), str(SEED), str(COUNT)]
    if progress:
        cmd.append("--progress")
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE if progress else None)


def _kill_at(db: Path, position: int) -> bool:
    """Run a child, SIGKILL it once it starts op ``position``; True if the kill landed."""
    proc = _child(db, progress=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if int(line) >= position:
            proc.send_signal(signal.SIGKILL)
            break
    proc.stdout.close()
    return proc.wait(timeout=120) == -signal.SIGKILL


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
    # Kill positions spread over the whole sequence, so most kills interrupt fresh writes.
    positions = sorted(rng.sample(range(1, COUNT - 1), KILLS))
    kills = 0
    for position in positions:
        for _ in range(3):  # a kill misses only if the child finished first; aim again
            if _kill_at(db, position):
                kills += 1
                break
        with Ledger(db) as led:
            report = led.verify()
            assert report.ok, report.render()
            check_invariants(led)
    assert kills == KILLS
    finisher = _child(db)
    assert finisher.wait(timeout=120) == 0
    reference = tmp_path / "reference.sqlite3"
    run_child(reference, SEED, COUNT)
    assert _fingerprint(db) == _fingerprint(reference)
