"""Schema version 13: tape witnesses' signed attestations: one per witness key and tape (a
tape superseded by a correction is attested afresh); owned by
``store/attestation_storage.py``.
"""

from typing import Final

SCRIPT: Final = """
CREATE TABLE tape_attestations (
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    tape_sha256 TEXT NOT NULL,
    witness TEXT NOT NULL,
    agrees INTEGER NOT NULL,
    first_difference TEXT,
    envelope TEXT NOT NULL,
    received_round INTEGER NOT NULL,
    PRIMARY KEY (run_id, round, tape_sha256, witness)
);
CREATE INDEX tape_attestations_witness ON tape_attestations (run_id, witness)
"""
