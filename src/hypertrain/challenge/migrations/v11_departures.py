"""Schema version 11: hotkeys that left between two metagraph snapshots: gone from the
newer one, or listed under another uid (deregistered and registered again); burned at
the next epoch. And the order in which the service accepted each competition commitment
(``seq``): it orders commitments of one beacon round, fixed when they are made.
"""

from typing import Final

SCRIPT: Final = """
CREATE TABLE metagraph_departures (
    hotkey TEXT PRIMARY KEY,
    old_uid INTEGER NOT NULL,
    new_uid INTEGER,
    noticed_epoch INTEGER NOT NULL
);
ALTER TABLE compete_commits ADD COLUMN seq INTEGER;
UPDATE compete_commits SET seq = rowid
"""
