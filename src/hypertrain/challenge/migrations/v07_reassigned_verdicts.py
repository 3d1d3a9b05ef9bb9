"""Schema version 7: re-assigned verdicts and bond settlement; the free-text dispute notes
are gone (the dispute game's tables replace them).

A faulty auditor's other verdicts of rounds not yet final stop counting and the
assignment is open again for another auditor (``reassigned_verdicts``); and
``bond_state``: whether a decided dispute's bond went back to the ledger (returned or
burned), so a restart settles every bond exactly once.
"""

from typing import Final

SCRIPT: Final = """
CREATE TABLE reassigned_verdicts (
    verdict_id TEXT PRIMARY KEY REFERENCES verdicts(verdict_id),
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    hotkey TEXT NOT NULL,
    auditor TEXT NOT NULL,
    dispute_id TEXT NOT NULL,
    reassigned_beacon_round INTEGER NOT NULL
);
CREATE INDEX reassigned_verdicts_round ON reassigned_verdicts (run_id, round, hotkey);
ALTER TABLE dispute_games ADD COLUMN bond_state TEXT
;
DROP TABLE disputes"""
