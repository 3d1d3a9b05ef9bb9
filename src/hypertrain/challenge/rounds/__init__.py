"""Rounds: the round state machine, the signed messages of a round (commits, verdicts,
merge tapes), audit selection, settlement, and the facts every view publishes."""
