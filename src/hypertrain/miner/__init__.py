"""The miner side: an island's tools (admission self-check now; join, train and commit later)."""
