"""SQLite storage of the service state: one database file in the state directory.

WAL mode with ``synchronous=NORMAL``: a committed transaction survives a killed
process (SIGKILL), which is the failure the service must ride out. The schema is
versioned: ``MIGRATIONS[i]`` takes the database from version ``i`` to ``i + 1`` and
runs inside one transaction, so an interrupted upgrade leaves the old version.
Uniqueness that the protocol relies on (one commit per island per round, one
verdict per auditor per assignment, one merge per round, one weights answer per
epoch) is enforced by primary keys here, not only by checks in Python.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from hypertrain.challenge.dashboard import baseline_storage
from hypertrain.dispute import store as dispute_store
from hypertrain.protocol.sqlite import open_database, transaction

_V1: Final = """
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

# Replay protection lives in the same database as the state it guards, so burning a
# nonce and applying its message commit in one transaction (never one without the other).
_V2: Final = """
CREATE TABLE seen_nonces (
    run_id TEXT NOT NULL,
    signer TEXT NOT NULL,
    nonce TEXT NOT NULL,
    expiry_round INTEGER NOT NULL,
    PRIMARY KEY (run_id, signer, nonce)
) WITHOUT ROWID;
CREATE INDEX seen_nonces_expiry ON seen_nonces (expiry_round);
"""

# Each island's admitted layout (its sample budget) becomes a column the round opener
# reads; rows admitted before take it from the join body they were admitted with.
_V3: Final = """
ALTER TABLE roster ADD COLUMN layout TEXT NOT NULL DEFAULT '{}';
UPDATE roster SET layout = COALESCE(json_extract(join_body, '$.layout'), '{}')
"""

# Admission challenges: a join opens one; the island is admitted (a roster row) only when
# its answer arrived by the deadline and a worker's reference hash equals every device's.
_V4: Final = """
CREATE TABLE admission_challenges (
    run_id TEXT NOT NULL,
    hotkey TEXT NOT NULL,
    device_class TEXT NOT NULL,
    join_body TEXT NOT NULL,
    join_beacon_round INTEGER NOT NULL,
    seed_beacon_round INTEGER NOT NULL,
    deadline_round INTEGER NOT NULL,
    seed INTEGER,
    hashes TEXT,
    answered_round INTEGER,
    status TEXT NOT NULL DEFAULT 'pending',
    reason TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, hotkey)
)
"""

# Competition mode: the signed spec, commitments, reveals, evaluation cycles, scores and
# each cycle's standings. One commitment per (competition, commitment hash); one score
# per evaluator per model per cycle.
_V6: Final = """
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

# Re-assigned verdicts and bond settlement; the free-text dispute notes are gone (the
# dispute game's tables replace them).
_V7: Final = dispute_store.SCHEMA_2 + ";\nDROP TABLE disputes"

# proven faults, and the merge corrections that roll them back (challenge.rollbacks)
_V9: Final = """
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

# Leaving, honeypot rotation and proven memory: a roster row keeps the round from which
# the island left (it stays for its escrow, faults and deregistration); honeypot lists are
# committed per period and revealed after it; an admission challenge stores the memory
# answers and the proven bytes a worker's check granted.
_V10: Final = """
ALTER TABLE roster ADD COLUMN left_round INTEGER;
ALTER TABLE roster ADD COLUMN leave_envelope TEXT;
ALTER TABLE roster ADD COLUMN proven_memory_bytes INTEGER NOT NULL DEFAULT 0;
CREATE TABLE honeypot_periods (
    run_id TEXT NOT NULL,
    period INTEGER NOT NULL,
    first_round INTEGER NOT NULL,
    last_round INTEGER NOT NULL,
    commitment TEXT NOT NULL,
    committed_beacon_round INTEGER NOT NULL,
    list_json TEXT,
    revealed_beacon_round INTEGER,
    PRIMARY KEY (run_id, period)
);
INSERT INTO honeypot_periods
    SELECT h.run_id, 0, 0, CAST(json_extract(r.manifest_json, '$.honeypots.reveal_round')
        AS INTEGER), json_extract(r.manifest_json, '$.honeypots.commitment'), 0, h.list_json,
        h.revealed_beacon_round
    FROM honeypot_reveals h JOIN runs r ON r.run_id = h.run_id;
ALTER TABLE admission_challenges ADD COLUMN memory_answers TEXT
"""

# Hotkeys that left between two metagraph snapshots: gone from the newer one, or listed
# under another uid (deregistered and registered again); burned at the next epoch. And
# the order in which the service accepted each competition commitment (``seq``): it
# orders commitments of one beacon round, fixed when they are made.
_V11: Final = """
CREATE TABLE metagraph_departures (
    hotkey TEXT PRIMARY KEY,
    old_uid INTEGER NOT NULL,
    new_uid INTEGER,
    noticed_epoch INTEGER NOT NULL
);
ALTER TABLE compete_commits ADD COLUMN seq INTEGER;
UPDATE compete_commits SET seq = rowid
"""

# Competition references: a hotkey's older model stays listed beside its newest one, so a
# cycle's standings hold one row per model (not per hotkey), each with whether it counted
# (a counted reference has no wins and no weight, so "counted" is stored, not derived).
_V12: Final = """
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

# Tape witnesses' signed attestations: one per witness key and tape (a tape superseded by
# a correction is attested afresh); owned by ``rounds/attestations.py``.
_V13: Final = """
CREATE TABLE tape_attestations (
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    tape_sha256 TEXT NOT NULL,
    witness TEXT NOT NULL,
    agrees INTEGER NOT NULL,
    first_difference TEXT,
    envelope TEXT NOT NULL,
    received_round INTEGER NOT NULL,
    PRIMARY KEY (run_id, round, tape_sha256, witness)
);
CREATE INDEX tape_attestations_witness ON tape_attestations (run_id, witness)
"""

# The admission backoff: refusals so far and the first round a join may come again.
_V14: Final = """
ALTER TABLE admission_challenges ADD COLUMN refusals INTEGER NOT NULL DEFAULT 0;
ALTER TABLE admission_challenges ADD COLUMN retry_round INTEGER NOT NULL DEFAULT 0
"""

# A missed assignment's late window (an assignment with no judging verdict when its audit
# phase ended): the first late verdict opens it and fixes its jury; verdicts count once a
# strict majority of that jury judged it, so no first late verdict decides alone.
_V15: Final = """
CREATE TABLE late_panels (
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    hotkey TEXT NOT NULL,
    opened_beacon_round INTEGER NOT NULL,
    close_round INTEGER NOT NULL,
    jury TEXT NOT NULL,
    PRIMARY KEY (run_id, round, hotkey)
)
"""

MIGRATIONS: Final[tuple[str, ...]] = (
    _V1,
    _V2,
    _V3,
    _V4,
    dispute_store.SCHEMA,
    _V6,
    _V7,
    dispute_store.SCHEMA_3,  # late verdicts' own dispute windows
    _V9,
    _V10,
    _V11,
    _V12,
    _V13,
    _V14,
    _V15,  # late panels of missed assignments
    baseline_storage.SCHEMA,  # each run's published baseline curve (informational)
)
DB_NAME: Final = "challenge.sqlite"
# The tables whose sizes the metrics report.
COUNTED: Final = ("runs", "rounds", "roster", "commits", "audits", "verdicts", "dispute_games",
                  "merges")  # fmt: skip


def connect(state_dir: Path) -> sqlite3.Connection:
    """Open (creating if needed) the service database and bring it to the latest schema."""
    state_dir.mkdir(parents=True, exist_ok=True)
    conn = open_database(state_dir / DB_NAME, foreign_keys=True)
    conn.row_factory = sqlite3.Row
    migrate(conn)
    return conn


def reader(state_dir: Path) -> sqlite3.Connection:
    """A second connection to the service database for lock-free reads of final records
    (WAL: it never waits for the writer and sees only committed rows)."""
    conn = open_database(state_dir / DB_NAME)
    conn.row_factory = sqlite3.Row
    return conn


def row_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Rows stored in each of the :data:`COUNTED` tables."""
    return {
        table: int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])  # noqa: S608
        for table in COUNTED
    }


def nonce_used(conn: sqlite3.Connection, run_id: str, signer: str, nonce: str) -> bool:
    """Whether a signer's nonce was already burned in a run (replay protection)."""
    row = conn.execute(
        "SELECT 1 FROM seen_nonces WHERE run_id = ? AND signer = ? AND nonce = ?",
        (run_id, signer, nonce),
    ).fetchone()
    return row is not None


def burn_nonce(
    conn: sqlite3.Connection, run_id: str, signer: str, nonce: str, expiry_round: int
) -> None:
    """Record a nonce as used (inside the caller's write transaction); a second burn of
    the same nonce raises ``sqlite3.IntegrityError``."""
    conn.execute(
        "INSERT INTO seen_nonces VALUES (?, ?, ?, ?)", (run_id, signer, nonce, expiry_round)
    )


def prune_nonces(conn: sqlite3.Connection, before_round: int) -> int:
    """Forget the nonces of envelopes that expired before ``before_round``; how many."""
    return conn.execute("DELETE FROM seen_nonces WHERE expiry_round < ?", (before_round,)).rowcount


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every pending migration; returns the resulting version."""
    version = schema_version(conn)
    if version > len(MIGRATIONS):
        raise RuntimeError(
            f"database schema version {version} is newer than this code ({len(MIGRATIONS)})"
        )
    for target in range(version + 1, len(MIGRATIONS) + 1):
        with transaction(conn):
            for statement in _statements(MIGRATIONS[target - 1]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version={target}")
    return schema_version(conn)


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]
