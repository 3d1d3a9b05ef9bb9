"""Rounds: the round state machine (phases, the audit selection, the commit phase's
pace, the model a round opens on), the late verdicts, the intake checks of a signed
claim, the signed messages on a merged tape (a witness's attestation, a merge
correction) and the public views of rounds. Its tables are in the store, the facts it
publishes in ``facts``, its settlement in ``settlement``."""
