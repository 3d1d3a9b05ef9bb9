"""Schema version 6: competition mode: the signed spec, commitments, reveals, evaluation
cycles, scores and each cycle's standings. One commitment per (competition, commitment
hash); one score per evaluator per model per cycle.
"""

from typing import Final

SCRIPT: Final = """
CREATE TABLE competitions (
    competition_id TEXT PRIMARY KEY,
    spec_json TEXT NOT NULL,
    spec_envelope TEXT NOT NULL,
    spec_digest TEXT NOT NULL,
    start_beacon_round INTEGER NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE compete_commits (
    competition_id TEXT NOT NULL REFERENCES competitions(competition_id),
    commitment TEXT NOT NULL,
    hotkey TEXT NOT NULL,
    commit_beacon_round INTEGER NOT NULL,
    commit_id TEXT NOT NULL,
    envelope TEXT NOT NULL,
    model_sha256 TEXT,
    files TEXT,
    base_url TEXT,
    reveal_envelope TEXT,
    revealed_beacon_round INTEGER,
    PRIMARY KEY (competition_id, commitment)
);
CREATE TABLE compete_cycles (
    competition_id TEXT NOT NULL REFERENCES competitions(competition_id),
    cycle INTEGER NOT NULL,
    beacon_round INTEGER NOT NULL,
    randomness TEXT NOT NULL,
    pages_key TEXT NOT NULL,
    score_deadline INTEGER NOT NULL,
    task TEXT NOT NULL,
    closed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (competition_id, cycle)
);
CREATE TABLE compete_scores (
    competition_id TEXT NOT NULL,
    cycle INTEGER NOT NULL,
    model_sha256 TEXT NOT NULL,
    evaluator TEXT NOT NULL,
    losses_f32 TEXT NOT NULL,
    envelope TEXT NOT NULL,
    received_beacon_round INTEGER NOT NULL,
    PRIMARY KEY (competition_id, cycle, model_sha256, evaluator)
);
CREATE TABLE compete_results (
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
    PRIMARY KEY (competition_id, cycle, hotkey)
)
"""
