"""Schema version 15: a missed assignment's late window (an assignment with no judging
verdict when its audit phase ended): the first late verdict opens it and fixes its jury;
verdicts count once a strict majority of that jury judged it, so no first late verdict
decides alone.
"""

from typing import Final

SCRIPT: Final = """
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
