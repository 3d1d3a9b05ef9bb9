"""Schema version 1: the first schema: runs, rounds, the roster, commits, audits, verdicts,
the legacy free-text ``disputes`` (dropped by version 7), merges, settlements, beacons,
the stored ``get_weights`` answers and the metagraph snapshot.
"""

from typing import Final

SCRIPT: Final = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    manifest_json TEXT NOT NULL,
    manifest_envelope TEXT NOT NULL,
    manifest_digest TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE rounds (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    round INTEGER NOT NULL,
    phase TEXT NOT NULL,
    open_beacon_round INTEGER NOT NULL,
    randomness TEXT NOT NULL,
    assignment_key TEXT NOT NULL,
    commit_deadline INTEGER NOT NULL,
    start_model_sha256 TEXT NOT NULL,
    start_model_url TEXT NOT NULL,
    open_envelope TEXT NOT NULL,
    selection_beacon_round INTEGER,
    audit_close_round INTEGER,
    dispute_deadline_round INTEGER,
    settled_epoch INTEGER,
    PRIMARY KEY (run_id, round)
);
CREATE TABLE roster (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    hotkey TEXT NOT NULL,
    admitted_beacon_round INTEGER NOT NULL,
    first_round INTEGER NOT NULL,
    probation_until_round INTEGER NOT NULL,
    device_class TEXT NOT NULL,
    num_devices INTEGER NOT NULL,
    join_body TEXT NOT NULL,
    PRIMARY KEY (run_id, hotkey)
);
CREATE TABLE commits (
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    hotkey TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    update_bytes INTEGER NOT NULL,
    train_loss REAL,
    body TEXT NOT NULL,
    envelope TEXT NOT NULL,
    accepted_beacon_round INTEGER NOT NULL,
    PRIMARY KEY (run_id, round, hotkey)
);
CREATE TABLE audits (
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    hotkey TEXT NOT NULL,
    segments TEXT NOT NULL,
    probation INTEGER NOT NULL,
    envelope TEXT NOT NULL,
    PRIMARY KEY (run_id, round, hotkey)
);
CREATE TABLE verdicts (
    verdict_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    hotkey TEXT NOT NULL,
    auditor TEXT NOT NULL,
    result TEXT NOT NULL,
    body TEXT NOT NULL,
    envelope TEXT NOT NULL,
    received_beacon_round INTEGER NOT NULL,
    UNIQUE (run_id, round, hotkey, auditor)
);
CREATE TABLE disputes (
    dispute_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    verdict_id TEXT NOT NULL REFERENCES verdicts(verdict_id),
    hotkey TEXT NOT NULL,
    body TEXT NOT NULL,
    envelope TEXT NOT NULL,
    received_beacon_round INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'open',
    UNIQUE (verdict_id, hotkey)
);
CREATE TABLE merges (
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    aggregator TEXT NOT NULL,
    new_model_sha256 TEXT NOT NULL,
    eval_loss REAL,
    body TEXT NOT NULL,
    envelope TEXT NOT NULL,
    received_beacon_round INTEGER NOT NULL,
    PRIMARY KEY (run_id, round)
);
CREATE TABLE settlements (
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    hotkey TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    PRIMARY KEY (run_id, round, hotkey)
);
CREATE TABLE beacons (
    round INTEGER PRIMARY KEY,
    randomness TEXT NOT NULL,
    signature TEXT NOT NULL
);
CREATE TABLE weights_answers (
    epoch INTEGER PRIMARY KEY,
    body BLOB NOT NULL
);
CREATE TABLE metagraph (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    snapshot TEXT NOT NULL,
    fetched_at REAL NOT NULL
);
"""
