"""Schema version 10: leaving, honeypot rotation and proven memory: a roster row keeps the
round from which the island left (it stays for its escrow, faults and deregistration);
honeypot lists are committed per period and revealed after it; an admission challenge
stores the memory answers and the proven bytes a worker's check granted.
"""

from typing import Final

SCRIPT: Final = """
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
