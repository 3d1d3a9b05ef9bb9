"""Schema version 4: admission challenges: a join opens one; the island is admitted (a
roster row) only when its answer arrived by the deadline and a worker's reference hash
equals every device's.
"""

from typing import Final

SCRIPT: Final = """
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
