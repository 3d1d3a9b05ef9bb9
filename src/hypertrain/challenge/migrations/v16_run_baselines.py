"""Schema version 16: each run's published baseline curve (informational; owned by
``store/baseline_storage.py``).
"""

from typing import Final

SCRIPT: Final = """
CREATE TABLE run_baselines (
    run_id TEXT PRIMARY KEY REFERENCES runs(run_id),
    label TEXT NOT NULL,
    heldout_loss TEXT NOT NULL,
    updated_beacon_round INTEGER NOT NULL
)
"""
