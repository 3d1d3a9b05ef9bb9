"""Schema version 14: the admission backoff: refusals so far and the first round a join may
come again.
"""

from typing import Final

SCRIPT: Final = """
ALTER TABLE admission_challenges ADD COLUMN refusals INTEGER NOT NULL DEFAULT 0;
ALTER TABLE admission_challenges ADD COLUMN retry_round INTEGER NOT NULL DEFAULT 0
"""
