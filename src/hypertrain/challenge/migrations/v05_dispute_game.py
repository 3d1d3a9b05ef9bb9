"""Schema version 5: the dispute game's tables: each game's whole state as JSON
(``dispute_games``, so a restarted service resumes where it stopped), every accepted
signed message in order as received (``dispute_messages``), the contested operation's
inputs (``dispute_inputs``), the auditors a re-audit found faulty (``faulty_auditors``),
and the first honeypot list reveal (``honeypot_reveals``, copied into
``honeypot_periods`` by version 10).
"""

from typing import Final

SCRIPT: Final = """
CREATE TABLE dispute_games (
    dispute_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    verdict_id TEXT NOT NULL UNIQUE REFERENCES verdicts(verdict_id),
    hotkey TEXT NOT NULL,
    auditor TEXT NOT NULL,
    bond INTEGER NOT NULL,
    stage TEXT NOT NULL,
    outcome TEXT,
    game TEXT NOT NULL,
    opened_beacon_round INTEGER NOT NULL,
    decided_beacon_round INTEGER,
    bytes_in INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX dispute_games_round ON dispute_games (run_id, round);
CREATE TABLE dispute_messages (
    dispute_id TEXT NOT NULL REFERENCES dispute_games(dispute_id),
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    signer TEXT NOT NULL,
    body TEXT NOT NULL,
    received_beacon_round INTEGER NOT NULL,
    PRIMARY KEY (dispute_id, seq)
);
CREATE TABLE dispute_inputs (
    dispute_id TEXT PRIMARY KEY REFERENCES dispute_games(dispute_id),
    sha256 TEXT NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE honeypot_reveals (
    run_id TEXT PRIMARY KEY,
    list_json TEXT NOT NULL,
    revealed_beacon_round INTEGER NOT NULL
);
CREATE TABLE faulty_auditors (
    run_id TEXT NOT NULL,
    auditor TEXT NOT NULL,
    round INTEGER NOT NULL,
    dispute_id TEXT NOT NULL,
    PRIMARY KEY (run_id, auditor, dispute_id)
)
"""
