"""Schema version 17: the legacy ``honeypot_reveals`` table (version 5) is dropped.

Version 10 copied its rows into ``honeypot_periods`` (period 0), and since then no query
of the service has read or written it: it was an empty table in every database created
after that.
"""

from typing import Final

SCRIPT: Final = """
DROP TABLE honeypot_reveals
"""
