"""Schema version 2: replay protection lives in the same database as the state it guards,
so burning a nonce and applying its message commit in one transaction (never one without
the other).
"""

from typing import Final

SCRIPT: Final = """
CREATE TABLE seen_nonces (
    run_id TEXT NOT NULL,
    signer TEXT NOT NULL,
    nonce TEXT NOT NULL,
    expiry_round INTEGER NOT NULL,
    PRIMARY KEY (run_id, signer, nonce)
) WITHOUT ROWID;
CREATE INDEX seen_nonces_expiry ON seen_nonces (expiry_round);
"""
