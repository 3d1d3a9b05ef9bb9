"""Child process for the crash test: apply a seeded random op sequence to a ledger file.

Run as ``python -m tests.ledger.crash_child DB SEED COUNT [--progress]``. It always starts
from the first op; ops already applied by an earlier (killed) run are idempotent no-ops.
With ``--progress`` it prints the index of each op on stdout just before applying it, so
the parent can kill it at a chosen position in the sequence rather than after a sleep.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from hypertrain.ledger import Ledger
from tests.ledger.ops import Driver, random_ops


def run(db: Path, seed: int, count: int, *, progress: bool = False) -> None:
    with Ledger(db) as ledger:
        driver = Driver(ledger)
        driver.setup()
        for index, op in enumerate(random_ops(random.Random(seed), count)):
            if progress:
                sys.stdout.write(f"{index}\n")
                sys.stdout.flush()
            driver.apply(op)


if __name__ == "__main__":
    run(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), progress="--progress" in sys.argv)
