"""Schema version 8: late verdicts' own dispute windows.

A fault verdict that arrived after its round's dispute window has a window of its own
(from its arrival): ``books_fault`` 0, its round is not final yet and settlement waits
for the window to close; 1, its round was final, and the fault is booked in the ledger
only once the window closed undisputed or its dispute was upheld (``booked``).
"""

from typing import Final

SCRIPT: Final = """
CREATE TABLE verdict_windows (
    verdict_id TEXT PRIMARY KEY REFERENCES verdicts(verdict_id),
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    hotkey TEXT NOT NULL,
    result TEXT NOT NULL,
    deadline_round INTEGER NOT NULL,
    books_fault INTEGER NOT NULL,
    closed INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX verdict_windows_round ON verdict_windows (run_id, round, closed)
"""
