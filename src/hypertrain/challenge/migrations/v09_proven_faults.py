"""Schema version 9: proven faults, and the merge corrections that roll them back
(``settlement.rollbacks``).
"""

from typing import Final

SCRIPT: Final = """
CREATE TABLE proven_faults (
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    hotkey TEXT NOT NULL,
    reason TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    PRIMARY KEY (run_id, round, hotkey)
);
CREATE TABLE merge_corrections (
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    tape_sha256 TEXT NOT NULL,
    supersedes TEXT NOT NULL,
    body TEXT NOT NULL,
    envelope TEXT NOT NULL,
    received_beacon_round INTEGER NOT NULL,
    PRIMARY KEY (run_id, round, seq),
    UNIQUE (run_id, supersedes)
)
"""
