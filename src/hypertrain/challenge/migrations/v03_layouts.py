"""Schema version 3: each island's admitted layout (its sample budget) becomes a column the
round opener reads; rows admitted before take it from the join body they were admitted
with.
"""

from typing import Final

SCRIPT: Final = """
ALTER TABLE roster ADD COLUMN layout TEXT NOT NULL DEFAULT '{}';
UPDATE roster SET layout = COALESCE(json_extract(join_body, '$.layout'), '{}')
"""
