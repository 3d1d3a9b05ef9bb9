"""Schema version 12: competition references: a hotkey's older model stays listed beside
its newest one, so a cycle's standings hold one row per model (not per hotkey), each
with whether it counted (a counted reference has no wins and no weight, so "counted" is
stored, not derived).
"""

from typing import Final

SCRIPT: Final = """
CREATE TABLE compete_results_v12 (
    competition_id TEXT NOT NULL,
    cycle INTEGER NOT NULL,
    hotkey TEXT NOT NULL,
    model_sha256 TEXT NOT NULL,
    mean_loss REAL,
    wins INTEGER NOT NULL,
    comparisons INTEGER NOT NULL,
    win_rate REAL NOT NULL,
    weight REAL NOT NULL,
    units INTEGER NOT NULL,
    counted INTEGER NOT NULL,
    PRIMARY KEY (competition_id, cycle, hotkey, model_sha256)
);
INSERT INTO compete_results_v12 SELECT competition_id, cycle, hotkey, model_sha256, mean_loss,
    wins, comparisons, win_rate, weight, units, (comparisons > 0 OR units > 0)
    FROM compete_results;
DROP TABLE compete_results;
ALTER TABLE compete_results_v12 RENAME TO compete_results
"""
